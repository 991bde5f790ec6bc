def fact: if . <= 1 then 1 else . * (. - 1 | fact) end; 20 | fact
