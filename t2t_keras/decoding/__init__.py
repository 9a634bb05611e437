"""Greedy and beam search over the cached decoder; text-level decoding helpers.

    from t2t_keras.decoding import search
    ids, scores = search.search(model, inputs, search.SearchOptions(beam_size=4, alpha=0.6))

Modules: `settings` (t2t's --decode_hparams as a frozen DecodeSettings, grouped by
concern), `search` (the search strategies: beam search, greedy for beam size 1, sampling,
constrained beam search, from the settings' search group), `search_common`
(`SearchOptions`, the output limit, what the loops run on), `beam_search` and `greedy`
(the two loops, each depending only on `search_common`), `lexical` (terminology
constraints), `translate` (text, batching), `files` (files, problem splits, BLEU),
`scoring`, `constraints`, `sharding`, `attention_maps` (the teacher-forced attention pass;
heatmaps), `alignment`, `sampling`, `spec`.
"""
