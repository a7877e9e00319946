"""jobhost."""
