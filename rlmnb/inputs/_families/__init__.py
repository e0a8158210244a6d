"""One module per family of input values (text, pandas, Arrow, numpy, containers, files,
Polars, Dask, DuckDB relations, pyarrow datasets, documents, image folders), each registered by module
and class name; and the documents' readers, which are no family: `docread` (extraction, run in the
sandbox kernel and in the quotes guard's confined helper) and `pdfscan` (the bounded host-side PDF scan).
"""

__all__: list[str] = []
