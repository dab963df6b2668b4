"""Writers: turn allocation results into text tables, JSON and CSV files."""
