"""Reserved token ids, defined once: PAD = 0 (padding), EOS = 1 (end of sentence), UNK = 2.

Every vocabulary reserves them (sentencepiece is trained with pad_id=0,
eos_id=1, unk_id=2, no BOS); the model, the searches, the decoder and the
export all read them from here.
"""

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
