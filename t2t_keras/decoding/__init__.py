"""Greedy and beam search over the cached decoder; text-level decoding helpers.

    from t2t_keras.decoding.beam_search import beam_search
    from t2t_keras.decoding.greedy import greedy_decode
    ids, scores = beam_search(model, inputs, beam_size=4, alpha=0.6, extra_length=50)

Modules: `beam_search`, `greedy` (tensors in, tensors out), `decoder` (text,
files, problem splits, BLEU), `attention` (heatmaps).
"""
