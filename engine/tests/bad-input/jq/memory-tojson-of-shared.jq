("x" * 1000000) as $s | [range(100000) | $s] | tojson | length
