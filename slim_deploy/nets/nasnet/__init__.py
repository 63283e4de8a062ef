"""NASNet-A and PNASNet-5 (TF-Slim's `nets/nasnet`), sharing one cell implementation.

`cells` holds what both families share (cell tables, drop path, stems, heads, the body);
`nasnet` and `pnasnet` hold their cells, configurations, builders and arg_scopes.
"""
