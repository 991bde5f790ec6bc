reduce range(100000) as $i (0; [.])
