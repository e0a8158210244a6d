"""The table engine under every table input: DuckDB, sql(), tables in files and their metadata.
"""

__all__: list[str] = []
