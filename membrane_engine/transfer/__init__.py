"""Moving records in and out: imports, exports' private files and the sample store."""
