[1, 2] as $x | reduce range(60) as $_ ($x; . + .) | length
