"""One module per family of input values (text, pandas, Arrow, numpy, containers, files,
Polars, Dask, DuckDB relations, pyarrow datasets), each registered by module and class name.
"""

__all__: list[str] = []
