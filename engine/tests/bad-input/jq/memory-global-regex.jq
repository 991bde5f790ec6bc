("x" * 10000000) | [match(""; "g")] | length
