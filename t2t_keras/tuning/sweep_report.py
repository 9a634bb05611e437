"""t2t-sweep's outputs: results.csv, results.md (table, seed spread, the paper's findings), a PNG.

Rows whose set stands for a Table 3 row (`table3_cpu.paper_row`) carry the
paper's dev perplexity and BLEU beside ours. The base row's spread over seeds
(max - min) is the noise floor: a difference from the base no larger than it
is not a finding.
"""

import csv
import os
import statistics

from t2t_keras import fileio

CSV_FILE, MD_FILE, PNG_FILE = "results.csv", "results.md", "results.png"
COLUMNS = ["row", "hparams_set", "overrides", "seed", "params", "steps", "minutes",
           "dev_perplexity", "dev_bleu", "dev_tok_bleu", "paper_row", "paper_perplexity",
           "paper_bleu"]


def with_paper(result):
  """The result with paper_row / paper_perplexity / paper_bleu filled in (None if no row)."""
  from t2t_keras.hparams.table3_cpu import PAPER_DEV, paper_row  # pylint: disable=import-outside-toplevel
  row = None if result.get("overrides") else paper_row(result["hparams_set"])
  ppl, bleu = PAPER_DEV.get(row, (None, None))
  return dict(result, paper_row=row, paper_perplexity=ppl, paper_bleu=bleu)


def by_paper_row(results):
  """{paper row: [results]} (several for a row trained with several seeds)."""
  out = {}
  for r in map(with_paper, results):
    if r["paper_row"]:
      out.setdefault(r["paper_row"], []).append(r)
  return out


def _mean(results, key):
  return statistics.fmean(r[key] for r in results)


def base_spread(rows):
  """(number of base seeds, BLEU spread, perplexity spread): max - min over the base's seeds."""
  base = rows.get("base", [])
  if len(base) < 2:
    return len(base), None, None
  bleus = [r["dev_bleu"] for r in base]
  ppls = [r["dev_perplexity"] for r in base]
  return len(base), max(bleus) - min(bleus), max(ppls) - min(ppls)


def _compare(rows, row, key, spread, sign):
  """'yes' if row's mean differs from the base's mean in direction `sign` by more than the
  spread, 'no' if the other way by more than the spread, else 'within noise'; None if missing."""
  if row not in rows or "base" not in rows or spread is None:
    return None, None
  diff = _mean(rows[row], key) - _mean(rows["base"], key)
  if abs(diff) <= spread:
    return "within noise", diff
  return ("yes" if diff * sign > 0 else "no"), diff


FINDINGS = [
    # (the paper's finding, [(row, key, sign)]: the row vs base differs as the paper found)
    ("one head is worse (A1)", [("a1", "dev_bleu", -1), ("a1", "dev_perplexity", +1)]),
    ("too many heads are worse (A4, 32 heads)", [("a4", "dev_bleu", -1)]),
    ("smaller d_k hurts (B1, B2)", [("b1", "dev_bleu", -1), ("b2", "dev_bleu", -1),
                                    ("b1", "dev_perplexity", +1)]),
    ("bigger models are better (C: N, d_model, d_ff)",
     [("c1", "dev_bleu", -1), ("c3", "dev_bleu", +1), ("c4", "dev_bleu", -1),
      ("c5", "dev_bleu", +1), ("c6", "dev_bleu", -1), ("c7", "dev_bleu", +1)]),
    ("dropout helps (D1: none is worse)", [("d1", "dev_bleu", -1), ("d1", "dev_perplexity", +1)]),
    ("label smoothing hurts perplexity (D3: none is lower)", [("d3", "dev_perplexity", -1)]),
    ("label smoothing helps BLEU (D3: none is worse)", [("d3", "dev_bleu", -1)]),
]


def verdicts(results):
  """[(finding, verdict, details)]: verdict 'reproduced', 'not reproduced', 'partly',
  'within noise' or 'not measured' from the comparisons against the base's seed spread."""
  rows = by_paper_row(results)
  _, bleu_spread, ppl_spread = base_spread(rows)
  out = []
  for finding, checks in FINDINGS:
    got = []
    for row, key, sign in checks:
      spread = bleu_spread if key == "dev_bleu" else ppl_spread
      verdict, diff = _compare(rows, row, key, spread, sign)
      if verdict is not None:
        got.append((row, key, verdict, diff))
    out.append((finding, _combine([g[2] for g in got]),
                "; ".join(f"{row.upper()} {'BLEU' if key == 'dev_bleu' else 'ppl'} "
                          f"{diff:+.2f} ({verdict})" for row, key, verdict, diff in got)))
  # Learned vs sinusoidal positions: the paper found them nearly identical.
  verdict_e, diff_e = _compare(rows, "e", "dev_bleu", bleu_spread, +1)
  if verdict_e is None:
    out.append(("learned and sinusoidal positions are nearly identical (E)", "not measured", ""))
  else:
    out.append(("learned and sinusoidal positions are nearly identical (E)",
                "reproduced" if verdict_e == "within noise" else "not reproduced",
                f"E BLEU {diff_e:+.2f} against a base spread of {bleu_spread:.2f}"))
  return out


def _combine(verdicts_):
  if not verdicts_:
    return "not measured"
  if all(v == "yes" for v in verdicts_):
    return "reproduced"
  if all(v == "no" for v in verdicts_):
    return "not reproduced"
  if all(v == "within noise" for v in verdicts_):
    return "within noise"
  return "partly" if "yes" in verdicts_ else "not reproduced"


def _fmt(value, digits=2):
  if value is None or value == "":
    return ""
  if isinstance(value, float):
    return f"{value:.{digits}f}"
  return str(value)


def format_markdown(results, pending=()):
  """The results table, the base's seed spread and the verdicts, as Markdown."""
  results = [with_paper(r) for r in results]
  lines = ["| row | paper row | params | steps | minutes | dev ppl | paper ppl | dev BLEU "
           "| paper BLEU | dev tok. BLEU |", "|---|---|---|---|---|---|---|---|---|---|"]
  for r in results:
    lines.append(f"| {r['row']} | {(r['paper_row'] or '').upper()} | {r['params'] / 1e6:.2f}M "
                 f"| {r['steps']} | {r['minutes']:.1f} | {r['dev_perplexity']:.2f} "
                 f"| {_fmt(r['paper_perplexity'])} | {r['dev_bleu']:.2f} "
                 f"| {_fmt(r['paper_bleu'], 1)} | {r['dev_tok_bleu']:.2f} |")
  for row_id in pending:
    lines.append(f"| {row_id} | | | | | pending | | | | |")
  rows = by_paper_row(results)
  seeds, bleu_spread, ppl_spread = base_spread(rows)
  lines.append("")
  if bleu_spread is None:
    lines.append(f"Base seeds: {seeds} (the spread needs at least 2).")
  else:
    lines.append(f"Base over {seeds} seeds: dev BLEU {_mean(rows['base'], 'dev_bleu'):.2f} "
                 f"(spread {bleu_spread:.2f}), perplexity "
                 f"{_mean(rows['base'], 'dev_perplexity'):.2f} (spread {ppl_spread:.2f}).")
  lines += ["", "| the paper's finding | here | row - base (mean of base seeds) |", "|---|---|---|"]
  lines += [f"| {f} | {v} | {d} |" for f, v, d in verdicts(results)]
  return "\n".join(lines) + "\n"


def write_tables(output_dir, results, pending=()):
  """results.csv and results.md in output_dir (atomically); the PNG once rows have numbers."""
  with fileio.atomic_open(os.path.join(output_dir, CSV_FILE), "w") as f:
    writer = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for r in results:
      writer.writerow(with_paper(r))
  fileio.write_atomic(os.path.join(output_dir, MD_FILE), format_markdown(results, pending))
  if by_paper_row(results):
    plot(results, os.path.join(output_dir, PNG_FILE))


def plot(results, path):
  """Dev BLEU and perplexity per Table 3 row, ours beside the paper's, grouped A-E."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  rows = by_paper_row(results)
  order = ["base"] + sorted(r for r in rows if r != "base")
  order = [r for r in order if r in rows]
  fig, axes = plt.subplots(2, 1, figsize=(max(6, 0.55 * len(order) + 2), 7), sharex=True)
  axes[1].set_xlim(-0.6, len(order) - 0.4)
  for ax, key, paper_i, label in ((axes[0], "dev_bleu", 1, "dev BLEU"),
                                  (axes[1], "dev_perplexity", 0, "dev perplexity")):
    ours = [_mean(rows[r], key) for r in order]
    xs = [x - 0.12 for x in range(len(order))]  # ours left of the paper's, side by side
    ax.plot(xs, ours, "o", color="tab:blue", label="ours (CPU scale, Multi30k dev)")
    for x, r in zip(xs, order):  # every seed of a row
      ys = [v[key] for v in rows[r]]
      if len(ys) > 1:
        ax.vlines(x, min(ys), max(ys), color="tab:blue", alpha=0.5)
    twin = ax.twinx()
    twin.plot([x + 0.24 for x in xs], [rows[r][0]["paper_perplexity" if paper_i == 0 else
                                                  "paper_bleu"] for r in order],
              "s", color="tab:orange", label="paper (newstest2013)")
    ax.legend(handles=ax.get_lines() + twin.get_lines(), loc="best", fontsize="small")
    ax.set_ylabel(f"ours: {label}", color="tab:blue")
    twin.set_ylabel(f"paper: {label}", color="tab:orange")
    for x, r in enumerate(order):
      if r != "base" and (x == 1 or order[x - 1][0] != r[0]):
        ax.axvline(x - 0.5, color="grey", lw=0.5)
  axes[1].set_xticks(range(len(order)))
  axes[1].set_xticklabels([r.upper() for r in order])
  axes[0].set_title("Table 3 rows: ours (left axis) and the paper's (right axis)")
  fig.tight_layout()
  with fileio.atomic_open(path, "wb") as f:
    fig.savefig(f, format="png", dpi=110)
  plt.close(fig)
