"""Greedy and beam search over the cached decoder; text-level decoding helpers.

    from t2t_keras.decoding import search
    ids, scores = search.search(model, inputs, beam_size=4, alpha=0.6, extra_length=50)

Modules: `settings` (t2t's --decode_hparams as a frozen DecodeSettings, grouped by
concern), `search` (beam search, or greedy for beam size 1, from the settings' search
group), `beam_search` and `greedy` (the two loops, each depending only on
`search_common`), `decoder` (text, batching), `files` (files, problem splits,
BLEU), `scoring`, `constraints`, `sharding`, `attention` (the teacher-forced attention
pass; heatmaps), `alignment`, `sampling`, `spec`.
"""
