[range(1e9)] | length
