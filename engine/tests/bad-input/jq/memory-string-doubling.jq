[limit(40; "x" | recurse(. + .))] | length
