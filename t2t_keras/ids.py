"""Reserved token ids, defined once: PAD = 0 (padding), EOS = 1 (end of sentence), UNK = 2.

Every vocabulary reserves PAD and EOS (sentencepiece is trained with pad_id=0,
eos_id=1, unk_id=2, no BOS; tensor2tensor's subword vocabularies have '<pad>' 0 and
'<EOS>' 1 and no UNK: their id 2 is a subtoken); the model, the searches, the decoder
and the export all read them from here.
"""

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2


def content_ids(ids):
  """The ids (ints) before the first EOS, PAD dropped: what a vocabulary decodes."""
  out = []
  for i in ids:
    i = int(i)
    if i == EOS_ID:
      break
    if i != PAD_ID:
      out.append(i)
  return out
