def f(g): f(g | .); f(.)
