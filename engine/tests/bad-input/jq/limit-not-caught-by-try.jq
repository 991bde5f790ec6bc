try last(range(1e18)) catch "caught"
