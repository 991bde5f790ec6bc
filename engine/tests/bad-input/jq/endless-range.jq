last(range(1e18))
