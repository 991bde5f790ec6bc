"[" * 100000 | fromjson
