"""The table model (``Column``, ``Table``) and its writers: Markdown, LaTeX (booktabs), CSV, HTML;
the provenance footer."""

from __future__ import annotations

import html
import io
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from common.io import write_text_atomic
from evaluation.report.load import FORMATS, Results, engine_label
from evaluation.report.stats import problem_counts

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------------
# Table model and writers
# ----------------------------------------------------------------------------------------------------

Kind = Literal["str", "int", "num", "signed", "pvalue", "count_pct"]


@dataclass(frozen=True)
class Column:
    """One displayed column; ``value`` (and ``sd``/``lo``/``hi``/``pct``) name columns of the data frame."""

    header: str
    value: str
    kind: Kind = "num"
    sd: str | None = None
    lo: str | None = None
    hi: str | None = None
    pct: str | None = None
    bold: Literal["max", "min"] | None = None
    digits: int = 2
    align: Literal["l", "r"] = "r"


@dataclass(frozen=True, eq=False)
class Table:
    """A table: ``data`` is written to CSV as is; ``columns`` say how Markdown and LaTeX show it."""

    name: str
    caption: str
    data: pd.DataFrame
    columns: tuple[Column, ...]
    footer: str
    note: str = ""
    """How to read the table (e.g. means vs medians); printed above the provenance footer."""
    appendix_md: str = ""
    """Extra Markdown after the footer (e.g. the audit's examples); not in LaTeX or CSV."""
    bold_allowed: Mapping[str, frozenset[int]] = field(default_factory=dict)
    """Column value -> the rows that may be bold (e.g. significant vs the baseline); absent: any row."""


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def fmt_float(value: float, digits: int, signed: bool = False) -> str:
    value = round(float(value), digits)
    if value == 0:
        value = 0.0  # no "-0.00"
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def _fmt_p(value: float) -> tuple[str, str]:
    if value < 0.001:
        return "<0.001", "$<$0.001"
    text = f"{value:.3f}"
    return text, text


def tex_escape(text: str) -> str:
    """Escape LaTeX special characters in plain text."""
    table = {
        "\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "±": r"$\pm$", "Δ": r"$\Delta$", "–": "--", "—": "---", "·": r"$\cdot$", "≥": r"$\geq$",
    }  # fmt: skip
    return "".join(table.get(ch, ch) for ch in str(text))


def _tex_minus(text: str) -> str:
    """A math minus for negative numbers (a text hyphen is too short in tables)."""
    return re.sub(r"(?<![\w$])-(?=\d)", "$-$", text)


def md_escape(text: str) -> str:
    return str(text).replace("|", r"\|")


def _bolds(table: Table) -> list[set[int]]:
    """Per column, the rows shown in bold: the best value, among the rows ``bold_allowed`` lets through."""
    out = []
    for col in table.columns:
        rows = _bold_rows(table.data, col)
        allowed = table.bold_allowed.get(col.value)
        out.append(rows if allowed is None else rows & set(allowed))
    return out


def _bold_rows(data: pd.DataFrame, col: Column) -> set[int]:
    if col.bold is None or col.value not in data:
        return set()
    values = pd.to_numeric(data[col.value], errors="coerce").round(col.digits)
    if values.notna().sum() < 2 or values.nunique() < 2:  # nothing to single out when every row ties
        return set()
    best = values.max() if col.bold == "max" else values.min()
    return {i for i, v in enumerate(values) if v == best}


def _render_cell(row: pd.Series, col: Column, target: Literal["md", "tex"], bold: bool) -> str:
    value = row.get(col.value)
    if _is_missing(value):
        return "–" if target == "md" else "--"
    if col.kind == "str":
        text = str(value)
        main = md_escape(text) if target == "md" else tex_escape(text)
        extra = ""
    elif col.kind == "int":
        main, extra = str(int(value)), ""
    elif col.kind == "pvalue":
        main = _fmt_p(float(value))[0 if target == "md" else 1]
        extra = ""
    elif col.kind == "count_pct":
        main = str(int(value))
        pct = row.get(col.pct) if col.pct else None
        extra = "" if _is_missing(pct) else f" ({fmt_float(pct, 1)}%)"
        if target == "tex":
            extra = extra.replace("%", r"\%")
    else:
        if isinstance(value, str):  # e.g. "not reached" in a numeric column
            return md_escape(value) if target == "md" else tex_escape(value)
        main = fmt_float(value, col.digits, signed=col.kind == "signed")
        parts = []
        sd = row.get(col.sd) if col.sd else None
        if not _is_missing(sd):
            parts.append(("± " if target == "md" else r"$\pm$") + fmt_float(sd, col.digits))
        lo = row.get(col.lo) if col.lo else None
        hi = row.get(col.hi) if col.hi else None
        if not _is_missing(lo) and not _is_missing(hi):
            parts.append(
                f"[{fmt_float(lo, 1, col.kind == 'signed')}, {fmt_float(hi, 1, col.kind == 'signed')}]"
            )
        extra = (" " + " ".join(parts)) if parts else ""
        if target == "tex":
            main, extra = _tex_minus(main), _tex_minus(extra)
            if extra:
                extra = r"\,{\scriptsize " + extra.strip() + "}"
    if bold:
        main = f"**{main}**" if target == "md" else rf"\textbf{{{main}}}"
    return main + extra


def render_markdown(table: Table) -> str:
    """GitHub Markdown: caption heading, table, footer line."""
    bolds = _bolds(table)
    lines = [f"### {table.caption}", ""]
    lines.append("| " + " | ".join(md_escape(c.header) for c in table.columns) + " |")
    lines.append("|" + "|".join(":---" if c.align == "l" else "---:" for c in table.columns) + "|")
    for i, (_, row) in enumerate(table.data.iterrows()):
        cells = [_render_cell(row, c, "md", i in b) for c, b in zip(table.columns, bolds, strict=False)]
        lines.append("| " + " | ".join(cells) + " |")
    if table.note:
        lines += ["", table.note]
    lines += ["", table.footer, ""]
    if table.appendix_md:
        lines += [table.appendix_md.rstrip("\n"), ""]
    return "\n".join(lines)


def render_latex(table: Table) -> str:
    """A booktabs ``table`` environment with caption, label and the footer under the tabular."""
    bolds = _bolds(table)
    spec = "".join(c.align for c in table.columns)
    lines = [
        "% generated by evaluation.report; needs \\usepackage{booktabs}",
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{tex_escape(table.caption)}}}",
        rf"\label{{tab:{table.name}}}",
        r"\resizebox{\linewidth}{!}{%",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(tex_escape(c.header) for c in table.columns) + r" \\",
        r"\midrule",
    ]
    for i, (_, row) in enumerate(table.data.iterrows()):
        lines.append(
            " & ".join(
                _render_cell(row, c, "tex", i in b) for c, b in zip(table.columns, bolds, strict=False)
            )
            + r" \\"
        )
    lines += [
        r"\bottomrule",
        r"\end{tabular}}",
        r"\par\smallskip",
        *([rf"{{\footnotesize {tex_escape(table.note)}}}\par"] if table.note else []),
        rf"{{\footnotesize {tex_escape(table.footer)}}}",
        r"\end{table}",
        "",
    ]
    return "\n".join(lines)


def _csv_cell(value: Any) -> str:
    if _is_missing(value):
        return ""
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return fmt_float(float(value), 4)
    return str(value)


def render_csv(table: Table) -> str:
    """Numbers with 4 decimals, ints as ints, empty for missing, '\\n' line ends."""
    text = table.data.astype(object).map(_csv_cell)
    buf = io.StringIO()
    text.to_csv(buf, index=False, lineterminator="\n")
    return buf.getvalue()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, as is) atomically: :func:`common.io.write_text_atomic`."""
    write_text_atomic(path, text)


HTML_STYLE = (
    "body{font:14px/1.4 system-ui,sans-serif;margin:1em}table{border-collapse:collapse}"
    "th,td{padding:3px 8px;border-bottom:1px solid #ddd;white-space:nowrap}th{border-bottom:2px solid #444}"
    "td.r,th.r{text-align:right}td.l,th.l{text-align:left}caption{font-weight:600;text-align:left;"
    "padding-bottom:6px}p.note,p.footer{font-size:12px;color:#444;max-width:70em}"
)


def _html_inline(text: str) -> str:
    """Markdown cell text (bold, inline code, escaped pipes) as escaped HTML."""
    text = html.escape(text.replace(r"\|", "|"), quote=False)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    return re.sub(r"`([^`]*)`", r"<code>\1</code>", text)


def _md_table_to_html(markdown: str) -> str:
    """The appendix's Markdown (``####`` headings and pipe tables) as HTML."""
    out: list[str] = []
    in_table = False
    for line in markdown.splitlines():
        cells = (
            [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]] if line.startswith("|") else None
        )
        if cells is not None and all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        if cells is not None:
            tag = "td" if in_table else "th"
            if not in_table:
                out.append("<table>")
                in_table = True
            out.append("<tr>" + "".join(f"<{tag} class=l>{_html_inline(c)}</{tag}>" for c in cells) + "</tr>")
            continue
        if in_table:
            out.append("</table>")
            in_table = False
        if line.startswith("#"):
            out.append(f"<h4>{_html_inline(line.lstrip('#').strip())}</h4>")
        elif line.strip():
            out.append(f"<p>{_html_inline(line)}</p>")
    if in_table:
        out.append("</table>")
    return "\n".join(out)


def render_html(table: Table) -> str:
    """A standalone HTML page (the ``snakemake --report`` view): the Markdown table's cells, note, footer."""
    bolds = _bolds(table)
    align = {"l": "l", "r": "r"}
    lines = [
        "<!DOCTYPE html>",
        '<html><head><meta charset="utf-8">',
        f"<title>{html.escape(table.name)}</title><style>{HTML_STYLE}</style></head><body>",
        "<table>",
        f"<caption>{html.escape(table.caption)}</caption>",
        "<tr>"
        + "".join(f"<th class={align[c.align]}>{html.escape(c.header)}</th>" for c in table.columns)
        + "</tr>",
    ]
    for i, (_, row) in enumerate(table.data.iterrows()):
        cells = [
            f"<td class={align[c.align]}>{_html_inline(_render_cell(row, c, 'md', i in b))}</td>"
            for c, b in zip(table.columns, bolds, strict=False)
        ]
        lines.append("<tr>" + "".join(cells) + "</tr>")
    lines.append("</table>")
    if table.note:
        lines.append(f'<p class="note">{html.escape(table.note)}</p>')
    lines.append(f'<p class="footer">{html.escape(table.footer)}</p>')
    if table.appendix_md:
        lines.append(_md_table_to_html(table.appendix_md))
    lines += ["</body></html>", ""]
    return "\n".join(lines)


RENDERERS: Mapping[str, Callable[[Table], str]] = {
    "md": render_markdown,
    "tex": render_latex,
    "csv": render_csv,
    "html": render_html,
}


def write_table(table: Table, out_dir: Path, formats: Sequence[str] = FORMATS) -> list[Path]:
    """Write ``{name}.md``, ``.tex``, ``.csv``, ``.html`` (those in ``formats``) atomically; returns the paths."""
    unknown = sorted(set(formats) - set(RENDERERS))
    if unknown:
        raise ValueError(f"unknown formats {unknown}; valid: {sorted(RENDERERS)}")
    paths = []
    for fmt in sorted(formats, key=FORMATS.index):
        path = out_dir / f"{table.name}.{fmt}"
        atomic_write_text(path, RENDERERS[fmt](table))
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------------------------------
# Provenance footer
# ----------------------------------------------------------------------------------------------------


def _join_limited(values: Sequence[str], limit: int = 6) -> str:
    values = list(values)
    return ", ".join(values[:limit]) + (f", +{len(values) - limit} more" if len(values) > limit else "")


def provenance(res: Results) -> dict[str, Any]:
    """Everything the footers summarise, in full (also written to ``provenance.json``)."""
    benches = res.benchmarks
    shas = {b: sorted({r.data_sha256 for r in res.evals if r.benchmark == b}) for b in benches}
    for bench, values in shas.items():
        if len(values) > 1:
            log.warning("%s: runs were evaluated on different data (sha256 %s)", bench, values)
    commits = sorted({str(m.get("git_commit", "")) for m in res.manifests.values() if m.get("git_commit")})
    return {
        "k": sorted({r.k for r in res.evals}),
        "n_samples": {b: sorted({r.n_samples for r in res.evals if r.benchmark == b}) for b in benches},
        "seeds": sorted({r.seed for r in res.evals}),
        "seeds_by_benchmark": {b: sorted({r.seed for r in res.evals if r.benchmark == b}) for b in benches},
        "n_problems": problem_counts(res),
        "grader_version": sorted({r.grader_version for r in res.evals}),
        "engines": {b: sorted({engine_label(r.engine) for r in res.evals if r.benchmark == b}) for b in benches},
        "engine_batch_sizes": {b: sorted({str(r.engine.get("batch_size")) for r in res.evals if r.benchmark == b
                                          and r.engine}) for b in benches},
        "data_sha256": shas,
        "manifest_ids": sorted(
            {r.manifest_id for r in res.evals if r.manifest_id}
            | {str(m["manifest_id"]) for m in res.manifests.values() if m.get("manifest_id")}
        ),
        "git_commit": commits,
        "git_dirty": any(bool(m.get("git_dirty")) for m in res.manifests.values()),
        "runs": {
            f"{method}/seed{seed}": {
                key: m.get(key)
                for key in ("manifest_id", "git_commit", "git_dirty", "config_hash", "torch_threads")
            }
            for (method, seed), m in sorted(res.manifests.items())
        },
        "packages": {
            f"{method}/seed{seed}": dict(sorted((m.get("packages") or {}).items()))
            for (method, seed), m in sorted(res.manifests.items())
        },
        "hardware": {
            f"{method}/seed{seed}": m.get("hardware") for (method, seed), m in sorted(res.manifests.items())
        },
    }


def footer_text(prov: Mapping[str, Any], benches: Sequence[str] | None = None) -> str:
    """One line: k, seeds, problems and samples, grader, data sha256 (12 hex), manifest ids, commit.

    ``benches`` restricts the per-benchmark parts to a table's benchmarks (default: all).
    """
    if benches is not None:
        keep = set(benches)
        prov = {
            **prov,
            "data_sha256": {b: v for b, v in prov["data_sha256"].items() if b in keep},
            "n_problems": {b: v for b, v in prov["n_problems"].items() if b in keep},
            "engines": {b: v for b, v in prov.get("engines", {}).items() if b in keep},
            "seeds": sorted({s for b in keep for s in prov.get("seeds_by_benchmark", {}).get(b, [])})
            or prov["seeds"],
        }

    def nums(values: Sequence[Any]) -> str:
        return ", ".join(str(v) for v in values) or "?"

    sha = "; ".join(f"{b} {'/'.join(s[:12] or '?' for s in v)}" for b, v in prov["data_sha256"].items())
    problems = ", ".join(
        f"{b}={n} ({'/'.join(map(str, prov['n_samples'].get(b, []))) or '?'})"
        for b, n in prov["n_problems"].items()
    )
    commits = ", ".join(c[:12] for c in prov["git_commit"]) or "?"
    return " · ".join(
        [
            f"k={nums(prov['k'])}",
            f"{len(prov['seeds'])} seed{'s' if len(prov['seeds']) != 1 else ''} (ids {nums(prov['seeds'])})",
            f"problems (samples) per checkpoint: {problems}",
            f"grader {nums(prov['grader_version'])}",
            f"engine {', '.join(sorted({e for v in prov.get('engines', {}).values() for e in v})) or '?'}",
            f"data sha256: {sha}",
            f"manifest {_join_limited(prov['manifest_ids']) or '?'}",
            f"commit {commits}" + (" (dirty)" if prov["git_dirty"] else ""),
        ]
    )


