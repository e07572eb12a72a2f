"""Documents as text: decoding and length-preserving normalization, the printed-number
grammar and each token's role, tables (Markdown, CSV, LaTeX) and LaTeX macro definitions.
Knows nothing of the evidence."""
