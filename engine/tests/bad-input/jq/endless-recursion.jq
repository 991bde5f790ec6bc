def f: [f]; f
