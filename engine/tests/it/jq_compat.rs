//! jq compatibility of the engine's jq filters, case by case against jq itself.
//!
//! Hooks run jq filters in binding `jqFilter`s and in `JQPatch` operations, written for
//! shell-operator, whose jq is gojq. Each case below records the outputs of the `jq`
//! binary (jq 1.6, as Debian ships it), chosen where jq 1.6, jq 1.7 and gojq agree; the
//! engine must give the same values, or fail where jq fails (error wording is not
//! compared). The recorded outputs are also checked against the installed `jq`, so the
//! table cannot drift from jq: that test fails, naming `.ci/setup`, when `jq` is missing.
//!
//! [`DIFFERENCES`] lists what still differs from jq on purpose, each with why; the test
//! checks that each difference is still exactly as recorded.

use operon::jq;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};

/// What running a filter on an input gives.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// These outputs, as JSON texts, in order.
    Outputs(&'static [&'static str]),
    /// A runtime error (whatever its message).
    Fails,
}

/// A filter, its input and what jq gives for it.
struct Case {
    filter: &'static str,
    input: &'static str,
    jq: Outcome,
}

const fn case(filter: &'static str, input: &'static str, out: &'static [&'static str]) -> Case {
    Case {
        filter,
        input,
        jq: Outcome::Outputs(out),
    }
}

const fn fails(filter: &'static str, input: &'static str) -> Case {
    Case {
        filter,
        input,
        jq: Outcome::Fails,
    }
}

/// A case where the engine knowingly gives something other than jq 1.6.
struct Difference {
    filter: &'static str,
    input: &'static str,
    jq: Outcome,
    operon: Outcome,
    why: &'static str,
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    // Assignments and updates through null and missing keys
    case(r#".metadata.labels.x = "y""#, r#"{"metadata":{"name":"a"}}"#, &[r#"{"metadata":{"name":"a","labels":{"x":"y"}}}"#]),
    case(r#".a.b.c |= 1"#, r#"{}"#, &[r#"{"a":{"b":{"c":1}}}"#]),
    case(r#".a.b.c |= 1"#, r#"null"#, &[r#"{"a":{"b":{"c":1}}}"#]),
    case(r#".spec.list[2] = 1"#, r#"{"spec":{}}"#, &[r#"{"spec":{"list":[null,null,1]}}"#]),
    case(r#".a[1].b = true"#, r#"null"#, &[r#"{"a":[null,{"b":true}]}"#]),
    case(r#"setpath(["a","b"]; 1)"#, r#"null"#, &[r#"{"a":{"b":1}}"#]),
    case(r#"setpath(["a",1]; "x")"#, r#"{}"#, &[r#"{"a":[null,"x"]}"#]),
    case(r#"setpath([]; 1)"#, r#"{"a":1}"#, &[r#"1"#]),
    case(r#".a += 1"#, r#"{}"#, &[r#"{"a":1}"#]),
    case(r#".a += "x""#, r#"{}"#, &[r#"{"a":"x"}"#]),
    case(r#".tags += ["b"]"#, r#"{}"#, &[r#"{"tags":["b"]}"#]),
    case(r#".tags += ["b"]"#, r#"{"tags":["a"]}"#, &[r#"{"tags":["a","b"]}"#]),
    case(r#".a -= 1"#, r#"{"a":5}"#, &[r#"{"a":4}"#]),
    case(r#".a *= 2"#, r#"{"a":5}"#, &[r#"{"a":10}"#]),
    case(r#".a /= 2"#, r#"{"a":5}"#, &[r#"{"a":2.5}"#]),
    case(r#".a %= 2"#, r#"{"a":5}"#, &[r#"{"a":1}"#]),
    fails(r#".a -= 1"#, r#"{}"#),
    case(r#".x.y //= 3"#, r#"{}"#, &[r#"{"x":{"y":3}}"#]),
    case(r#".x //= 3"#, r#"{"x":false}"#, &[r#"{"x":3}"#]),
    case(r#".x //= 3"#, r#"{"x":0}"#, &[r#"{"x":0}"#]),
    case(r#".a |= . + 1"#, r#"{"a":1}"#, &[r#"{"a":2}"#]),
    case(r#".a |= (.b = 1)"#, r#"{}"#, &[r#"{"a":{"b":1}}"#]),
    case(r#".[] += 10"#, r#"[1,2,3]"#, &[r#"[11,12,13]"#]),
    case(r#".[] |= tostring"#, r#"{"a":1,"b":[1]}"#, &[r#"{"a":"1","b":"[1]"}"#]),
    case(r#".a = (1,2)"#, r#"{}"#, &[r#"{"a":1}"#, r#"{"a":2}"#]),
    case(r#".a = .b"#, r#"{"b":5}"#, &[r#"{"b":5,"a":5}"#]),
    case(r#".a.b = .c"#, r#"{"c":[1]}"#, &[r#"{"c":[1],"a":{"b":[1]}}"#]),
    case(r#"(.a, .b) = 1"#, r#"{}"#, &[r#"{"a":1,"b":1}"#]),
    case(r#"(.a, .b.c) |= 7"#, r#"{"a":1}"#, &[r#"{"a":7,"b":{"c":7}}"#]),
    case(r#".a[] |= . * 2"#, r#"{"a":[1,2]}"#, &[r#"{"a":[2,4]}"#]),
    case(r#".items[] |= (.x = 1)"#, r#"{"items":[{},{"x":0}]}"#, &[r#"{"items":[{"x":1},{"x":1}]}"#]),
    case(r#".a |= empty"#, r#"{"a":1,"b":2}"#, &[r#"{"b":2}"#]),
    case(r#".a.b |= empty"#, r#"null"#, &[r#"null"#]),
    case(r#".a = 1 | .b = 2"#, r#"{}"#, &[r#"{"a":1,"b":2}"#]),
    fails(r#".a.b = 1"#, r#"{"a":1}"#),
    case(r#"getpath(["a","b"]) |= 5"#, r#"null"#, &[r#"{"a":{"b":5}}"#]),
    case(r#"reduce .[] as [$k, $v] (null; .[$k] = $v)"#, r#"[["a",1],["b",2]]"#, &[r#"{"a":1,"b":2}"#]),
    case(r#".a."b-c" = 1"#, r#"{}"#, &[r#"{"a":{"b-c":1}}"#]),
    case(r#".["a"]["b"] = 1"#, r#"{}"#, &[r#"{"a":{"b":1}}"#]),
    case(r#".a as $x | .b = $x"#, r#"{"a":3}"#, &[r#"{"a":3,"b":3}"#]),
    case(r#".a |= (. // {}) + {"k":"v"}"#, r#"{}"#, &[r#"{"a":{"k":"v"}}"#]),
    case(r#".[1:3] |= reverse"#, r#"[1,2,3,4]"#, &[r#"[1,3,2,4]"#]),
    case(r#"getpath(["a"]) = 1"#, r#"{}"#, &[r#"{"a":1}"#]),
    case(r#".. |= (if type == "number" then . + 1 else . end)"#, r#"[1,[2]]"#, &[r#"[2,[3]]"#]),
    // Array index past the end, negative indexes, slices
    case(r#".[5] |= 7"#, r#"[3,1]"#, &[r#"[3,1,null,null,null,7]"#]),
    case(r#".[2] = 1"#, r#"[]"#, &[r#"[null,null,1]"#]),
    case(r#".[-1] = 9"#, r#"[1,2,3]"#, &[r#"[1,2,9]"#]),
    case(r#".[-3] = 9"#, r#"[1,2,3]"#, &[r#"[9,2,3]"#]),
    fails(r#".[-5] = 1"#, r#"[1,2,3]"#),
    fails(r#".[-1] = 5"#, r#"null"#),
    case(r#".[1:] = ["x"]"#, r#"[1,2,3]"#, &[r#"[1,"x"]"#]),
    case(r#".[5:7] = ["x"]"#, r#"[1,2]"#, &[r#"[1,2,"x"]"#]),
    case(r#".[1:] |= map(. * 10)"#, r#"[1,2,3]"#, &[r#"[1,20,30]"#]),
    case(r#".[:-1] = []"#, r#"[1,2,3]"#, &[r#"[3]"#]),
    fails(r#".[1:2] = 5"#, r#"[1,2,3]"#),
    case(r#".[-1]"#, r#"[1,2,3]"#, &[r#"3"#]),
    case(r#".[-4]"#, r#"[1,2,3]"#, &[r#"null"#]),
    case(r#".[10]"#, r#"[1,2,3]"#, &[r#"null"#]),
    case(r#".[2:4]"#, r#""abcdef""#, &[r#""cd""#]),
    case(r#".[-2:]"#, r#"[1,2,3]"#, &[r#"[2,3]"#]),
    case(r#".[:1]"#, r#"[1,2,3]"#, &[r#"[1]"#]),
    case(r#".[2:1] = ["x"]"#, r#"[1,2,3]"#, &[r#"[1,2,"x",3]"#]),
    case(r#".a[-1:] = [9]"#, r#"{"a":[1,2]}"#, &[r#"{"a":[1,9]}"#]),
    fails(r#".a["b"] |= 1"#, r#"{"a":[]}"#),
    // Del and delpaths
    case(r#"del(.nothing.deeper)"#, r#"{"a":1}"#, &[r#"{"a":1}"#]),
    fails(r#"del(.a.b)"#, r#"{"a":1}"#),
    case(r#"del(.a, .b)"#, r#"{"a":1,"b":2,"c":3}"#, &[r#"{"c":3}"#]),
    case(r#"del(.[0,2])"#, r#"[1,2,3]"#, &[r#"[2]"#]),
    case(r#"del(.[1:])"#, r#"[1,2,3]"#, &[r#"[1]"#]),
    case(r#"del(.[-1])"#, r#"[1,2,3]"#, &[r#"[1,2]"#]),
    case(r#"del(.[] | select(. > 1))"#, r#"[1,2,3,1]"#, &[r#"[1,1]"#]),
    case(r#"del(.a[5])"#, r#"{"a":[1]}"#, &[r#"{"a":[1]}"#]),
    case(r#"del(.[])"#, r#"[1,2]"#, &[r#"[]"#]),
    case(r#"del(.)"#, r#"{"a":1}"#, &[r#"null"#]),
    case(r#"del(.. | select(. == null))"#, r#"{"a":null,"b":{"c":null,"d":1}}"#, &[r#"{"b":{"d":1}}"#]),
    case(r#"del(.. | nulls)"#, r#"[1,null,[null,2]]"#, &[r#"[1,[2]]"#]),
    case(r#"del(.a[0], .a[1])"#, r#"{"a":[1,2,3]}"#, &[r#"{"a":[3]}"#]),
    case(r#"del(.a[0].b, .a[1])"#, r#"{"a":[{"b":1,"c":2},3,4]}"#, &[r#"{"a":[{"c":2},4]}"#]),
    case(r#"delpaths([["a"],["b","c"]])"#, r#"{"a":1,"b":{"c":2,"d":3}}"#, &[r#"{"b":{"d":3}}"#]),
    case(r#"delpaths([[1],[2]])"#, r#"[0,1,2,3]"#, &[r#"[0,3]"#]),
    case(r#"delpaths([[5]])"#, r#"[1,2]"#, &[r#"[1,2]"#]),
    case(r#"delpaths([["x","y"]])"#, r#"null"#, &[r#"null"#]),
    case(r#"delpaths([[]])"#, r#"{"a":1}"#, &[r#"null"#]),
    case(r#"to_entries"#, r#"{"a":1,"b":2}"#, &[r#"[{"key":"a","value":1},{"key":"b","value":2}]"#]),
    case(r#"del(.[2:1])"#, r#"[1,2,3]"#, &[r#"[1,2,3]"#]),
    case(r#"del(.[1:], .[0])"#, r#"[1,2,3]"#, &[r#"[]"#]),
    case(r#"del(..|select(. == 2))"#, r#"[1,[2,3],2]"#, &[r#"[1,[3]]"#]),
    // Entries, select, map, alternatives
    case(r#"to_entries"#, r#"[5,6]"#, &[r#"[{"key":0,"value":5},{"key":1,"value":6}]"#]),
    case(r#"to_entries"#, r#"{}"#, &[r#"[]"#]),
    case(r#"from_entries"#, r#"[{"key":"a","value":1},{"name":"b","value":2}]"#, &[r#"{"a":1,"b":2}"#]),
    case(r#"from_entries"#, r#"[{"key":"a","value":null}]"#, &[r#"{"a":null}"#]),
    case(r#"with_entries(.value += 1)"#, r#"{"a":1,"b":2}"#, &[r#"{"a":2,"b":3}"#]),
    case(r#"with_entries(.key |= ascii_upcase)"#, r#"{"a":1,"b":2}"#, &[r#"{"A":1,"B":2}"#]),
    case(r#"with_entries(select(.value != null))"#, r#"{"a":1,"b":null}"#, &[r#"{"a":1}"#]),
    case(r#"to_entries | map(select(.value > 1)) | from_entries"#, r#"{"a":1,"b":2,"c":3}"#, &[r#"{"b":2,"c":3}"#]),
    case(r#"[.[] | select(.phase == "Running") | .name]"#, r#"[{"name":"a","phase":"Running"},{"name":"b","phase":"Pending"}]"#, &[r#"["a"]"#]),
    case(r#"map(. + 1)"#, r#"[1,2]"#, &[r#"[2,3]"#]),
    case(r#"map(select(. > 1))"#, r#"[1,2,3]"#, &[r#"[2,3]"#]),
    case(r#"map_values(. + 1)"#, r#"{"a":1,"b":2}"#, &[r#"{"a":2,"b":3}"#]),
    case(r#"map_values(empty)"#, r#"{"a":1}"#, &[r#"{}"#]),
    case(r#".a // "d""#, r#"{"a":null}"#, &[r#""d""#]),
    case(r#".a // "d""#, r#"{"a":false}"#, &[r#""d""#]),
    case(r#".a // "d""#, r#"{"a":0}"#, &[r#"0"#]),
    case(r#"(.a, .b) // 3"#, r#"{"a":null,"b":2}"#, &[r#"2"#]),
    case(r#"[.[] | . // 0]"#, r#"[null,false,1]"#, &[r#"[0,0,1]"#]),
    case(r#".a? // "x""#, r#""str""#, &[r#""x""#]),
    // Strings and conversions
    case(r#""name: \(.name), n: \(.n)""#, r#"{"name":"x","n":1.5}"#, &[r#""name: x, n: 1.5""#]),
    case(r#""obj: \(.a)""#, r#"{"a":{"b":[1,"x",null]}}"#, &[r#""obj: {\"b\":[1,\"x\",null]}""#]),
    case(r#""\(1,2)""#, r#"null"#, &[r#""1""#, r#""2""#]),
    case(r#"[.[] | tostring]"#, r#"[1,"a",null,true,{"a":[1,2]},1.5,100000000000]"#, &[r#"["1","a","null","true","{\"a\":[1,2]}","1.5","100000000000"]"#]),
    case(r#"[.[] | tojson]"#, r#"[1,"a",null,true,{"a":[1,2]},1.5]"#, &[r#"["1","\"a\"","null","true","{\"a\":[1,2]}","1.5"]"#]),
    case(r#"tojson"#, r#""é\n""#, &[r#""\"é\\n\"""#]),
    case(r#"fromjson"#, r#""{\"a\":[1,2]}""#, &[r#"{"a":[1,2]}"#]),
    case(r#"@text"#, r#"[1,"a"]"#, &[r#""[1,\"a\"]""#]),
    case(r#"@json "v: \(.)""#, r#"[1,"a"]"#, &[r#""v: [1,\"a\"]""#]),
    case(r#"@base64"#, r#""hello""#, &[r#""aGVsbG8=""#]),
    case(r#"@base64"#, r#"{"a":1}"#, &[r#""eyJhIjoxfQ==""#]),
    case(r#"@base64d"#, r#""aGVsbG8=""#, &[r#""hello""#]),
    case(r#"@base64 "x\(.)""#, r#""hello""#, &[r#""xaGVsbG8=""#]),
    case(r#"@sh"#, r#""it's""#, &[r#""'it'\\''s'""#]),
    case(r#"@sh "echo \(.)""#, r#"["a b","c"]"#, &[r#""echo 'a b' 'c'""#]),
    case(r#"@uri"#, r#""a b&c/é""#, &[r#""a%20b%26c%2F%C3%A9""#]),
    case(r#"@html"#, r#""<&>'\"""#, &[r#""&lt;&amp;&gt;&apos;&quot;""#]),
    case(r#"@csv"#, r#"[1,"a,b",null,"q\"q"]"#, &[r#""1,\"a,b\",,\"q\"\"q\"""#]),
    case(r#"@tsv"#, r#"[1,"a\tb",null]"#, &[r#""1\ta\\tb\t""#]),
    case(r#"ascii_downcase"#, r#""ABC-d""#, &[r#""abc-d""#]),
    case(r#"ascii_upcase"#, r#""abc-D""#, &[r#""ABC-D""#]),
    case(r#"ltrimstr("web-")"#, r#""web-1""#, &[r#""1""#]),
    case(r#"rtrimstr(".yaml")"#, r#""a.yaml""#, &[r#""a""#]),
    case(r#"ltrimstr("x")"#, r#"5"#, &[r#"5"#]),
    case(r#"startswith("we")"#, r#""web""#, &[r#"true"#]),
    case(r#"endswith("b")"#, r#""web""#, &[r#"true"#]),
    case(r#"split("-")"#, r#""a-b--c""#, &[r#"["a","b","","c"]"#]),
    case(r#"split(", *"; null)"#, r#""a, b,c""#, &[r#"["a","b","c"]"#]),
    case(r#"join(",")"#, r#"["a","b","c"]"#, &[r#""a,b,c""#]),
    case(r#"join("-")"#, r#"["a",1,null,true]"#, &[r#""a-1--true""#]),
    case(r#"explode"#, r#""aé""#, &[r#"[97,233]"#]),
    case(r#"implode"#, r#"[97,233]"#, &[r#""aé""#]),
    case(r#"length"#, r#""aé""#, &[r#"2"#]),
    case(r#"utf8bytelength"#, r#""aé""#, &[r#"3"#]),
    case(r#"length"#, r#"null"#, &[r#"0"#]),
    case(r#"length"#, r#"{"a":1}"#, &[r#"1"#]),
    case(r#"tonumber"#, r#""1.50""#, &[r#"1.5"#]),
    case(r#"tonumber + 1"#, r#""10""#, &[r#"11"#]),
    case(r#"tostring"#, r#""s""#, &[r#""s""#]),
    case(r#"indices(", ")"#, r#""a, b, c""#, &[r#"[1,4]"#]),
    case(r#"index(",")"#, r#""a,b,c""#, &[r#"1"#]),
    case(r#"rindex(",")"#, r#""a,b,c""#, &[r#"3"#]),
    case(r#"[splits(", *")]"#, r#""a, b,c""#, &[r#"["a","b","c"]"#]),
    case(r#"4 / 2 | tostring"#, r#"null"#, &[r#""2""#]),
    case(r#""\(.a * 100 / .b)%""#, r#"{"a":1,"b":2}"#, &[r#""50%""#]),
    case(r#"[.[] / 2 | tojson]"#, r#"[4,3]"#, &[r#"["2","1.5"]"#]),
    case(r#"{"a": (4 / 2)} | tojson"#, r#"null"#, &[r#""{\"a\":2}""#]),
    case(r#"{"b": 1} + {"a": 2} | tojson"#, r#"null"#, &[r#""{\"b\":1,\"a\":2}""#]),
    case(r#"[nan] | tojson"#, r#"null"#, &[r#""[null]""#]),
    case(r#"@text "\(.)""#, r#"{"a":1}"#, &[r#""{\"a\":1}""#]),
    case(r#"tojson"#, r#""\u0000\u001f\u007f""#, &[r#""\"\\u0000\\u001f\\u007f\"""#]),
    case(r#"ltrimstr(1)"#, r#""1a""#, &[r#""1a""#]),
    case(r#"rtrimstr("x")"#, r#"null"#, &[r#"null"#]),
    case(r#"@uri"#, r#""ü""#, &[r#""%C3%BC""#]),
    case(r#"with_entries(.value |= tostring)"#, r#"{"a":1,"b":[1]}"#, &[r#"{"a":"1","b":"[1]"}"#]),
    case(r#"todate"#, r#"1425599507.9"#, &[r#""2015-03-05T23:51:47Z""#]),
    case(r#".a + 1"#, r#"{"a":null}"#, &[r#"1"#]),
    fails(r#"from_entries"#, r#"[{"key":1,"value":2}]"#),
    fails(r#"has("a")"#, r#"[1]"#),
    fails(r#"to_entries"#, r#"null"#),
    // Regular expressions
    case(r#"test("^web-[0-9]+$")"#, r#""web-12""#, &[r#"true"#]),
    case(r#"test("WEB"; "i")"#, r#""web""#, &[r#"true"#]),
    case(r#"test("x")"#, r#""web""#, &[r#"false"#]),
    case(r#"capture("(?<a>[a-z]+)-(?<n>[0-9]+)")"#, r#""web-12""#, &[r#"{"a":"web","n":"12"}"#]),
    case(r#"[match("a"; "g").offset]"#, r#""banana""#, &[r#"[1,3,5]"#]),
    case(r#"sub("-"; "_")"#, r#""a-b-c""#, &[r#""a_b-c""#]),
    case(r#"gsub("-"; "_")"#, r#""a-b-c""#, &[r#""a_b_c""#]),
    case(r#"gsub("\\s+"; " ")"#, r#""a  b \t c""#, &[r#""a b c""#]),
    case(r#"sub("(?<x>[a-z]+)"; "<\(.x)>")"#, r#""ab12""#, &[r#""<ab>12""#]),
    case(r#"[scan("[0-9]+")]"#, r#""a1b22c333""#, &[r#"["1","22","333"]"#]),
    case(r#"[.[] | select(test("^a"))]"#, r#"["ab","ba","ac"]"#, &[r#"["ab","ac"]"#]),
    // Keys, paths, getpath/setpath
    case(r#"keys"#, r#"{"b":1,"a":2,"C":3}"#, &[r#"["C","a","b"]"#]),
    case(r#"keys"#, r#"[5,6]"#, &[r#"[0,1]"#]),
    case(r#"has("a")"#, r#"{"a":null}"#, &[r#"true"#]),
    case(r#"has(1)"#, r#"[1,2]"#, &[r#"true"#]),
    case(r#"[paths]"#, r#"{"a":{"b":1},"c":[2]}"#, &[r#"[["a"],["a","b"],["c"],["c",0]]"#]),
    case(r#"[paths(type == "number")]"#, r#"{"a":{"b":1},"c":[2]}"#, &[r#"[["a","b"],["c",0]]"#]),
    case(r#"[paths(..)]"#, r#"[[1]]"#, &[r#"[[0],[0],[0,0]]"#]),
    case(r#"path(.a[0].b)"#, r#"null"#, &[r#"["a",0,"b"]"#]),
    case(r#"[path(..)]"#, r#"{"a":[1]}"#, &[r#"[[],["a"],["a",0]]"#]),
    case(r#"path(.a[1:])"#, r#"{"a":[1,2]}"#, &[r#"["a",{"start":1,"end":null}]"#]),
    case(r#"path(.a[1:3])"#, r#"{"a":[1,2]}"#, &[r#"["a",{"start":1,"end":3}]"#]),
    case(r#"[path(.a[] | select(. > 1))]"#, r#"{"a":[1,2,3]}"#, &[r#"[["a",1],["a",2]]"#]),
    case(r#"getpath(["a","b"])"#, r#"{"a":{"b":1}}"#, &[r#"1"#]),
    case(r#"getpath(["x","y"])"#, r#"{}"#, &[r#"null"#]),
    case(r#"getpath(["a",0,"b"])"#, r#"null"#, &[r#"null"#]),
    fails(r#"getpath(["a","b"])"#, r#"{"a":1}"#),
    case(r#"[getpath(["a"],["b"])]"#, r#"{"a":1,"b":2}"#, &[r#"[1,2]"#]),
    case(r#"to_entries | map("\(.key)=\(.value)") | join(",")"#, r#"{"app":"web","tier":"front"}"#, &[r#""app=web,tier=front""#]),
    fails(r#"getpath(["a"])"#, r#"[1]"#),
    case(r#"[paths(numbers)]"#, r#"[1,[2]]"#, &[r#"[[0],[1,0]]"#]),
    // Limit, first, reduce, foreach, if, and other control flow
    case(r#"[limit(2; .[])]"#, r#"[1,2,3]"#, &[r#"[1,2]"#]),
    case(r#"[limit(3; repeat(1))]"#, r#"null"#, &[r#"[1,1,1]"#]),
    case(r#"first(.[])"#, r#"[4,5]"#, &[r#"4"#]),
    case(r#"first"#, r#"[4,5]"#, &[r#"4"#]),
    case(r#"last"#, r#"[4,5]"#, &[r#"5"#]),
    case(r#"[first(empty)]"#, r#"null"#, &[r#"[]"#]),
    case(r#"first(range(10; 0; -1))"#, r#"null"#, &[r#"10"#]),
    case(r#"nth(1)"#, r#"[4,5,6]"#, &[r#"5"#]),
    case(r#"reduce .[] as $x (0; . + $x)"#, r#"[1,2,3]"#, &[r#"6"#]),
    case(r#"reduce .[] as $x ({}; .[$x.k] += [$x.v])"#, r#"[{"k":"a","v":1},{"k":"a","v":2},{"k":"b","v":3}]"#, &[r#"{"a":[1,2],"b":[3]}"#]),
    case(r#"[foreach .[] as $x (0; . + $x)]"#, r#"[1,2,3]"#, &[r#"[1,3,6]"#]),
    case(r#"[foreach .[] as $x (0; . + $x; [$x, .])]"#, r#"[1,2,3]"#, &[r#"[[1,1],[2,3],[3,6]]"#]),
    case(r#"if .a then "yes" elif .b then "b" else "no" end"#, r#"{"a":1}"#, &[r#""yes""#]),
    case(r#"if .a then "yes" elif .b then "b" else "no" end"#, r#"{"b":1}"#, &[r#""b""#]),
    case(r#"if .a then "yes" elif .b then "b" else "no" end"#, r#"{}"#, &[r#""no""#]),
    case(r#"[.[] | if . > 1 then "big" else "small" end]"#, r#"[1,2]"#, &[r#"["small","big"]"#]),
    case(r#"try error("x") catch ."#, r#"null"#, &[r#""x""#]),
    case(r#"try error({"a":1}) catch .a"#, r#"null"#, &[r#"1"#]),
    case(r#"try (.a.b = 1) catch "failed""#, r#"{"a":1}"#, &[r#""failed""#]),
    case(r#"[.[] | try (if . == 2 then error("no") else . end) catch "caught"]"#, r#"[1,2,3]"#, &[r#"[1,"caught",3]"#]),
    fails(r#".a.b"#, r#"{"a":1}"#),
    fails(r#"error("boom")"#, r#"null"#),
    case(r#"[.[]?]"#, r#"3"#, &[r#"[]"#]),
    case(r#"label $out | foreach .[] as $x (0; . + $x; if . > 3 then ., break $out else empty end)"#, r#"[1,2,3,4]"#, &[r#"6"#]),
    case(r#"def f(x): x * 2; f(.a)"#, r#"{"a":3}"#, &[r#"6"#]),
    case(r#"def inc: . + 1; map(inc)"#, r#"[1,2]"#, &[r#"[2,3]"#]),
    case(r#"def fac: if . <= 1 then 1 else . * (. - 1 | fac) end; fac"#, r#"5"#, &[r#"120"#]),
    case(r#". as {a: $x, b: [$y]} | [$x, $y]"#, r#"{"a":1,"b":[2]}"#, &[r#"[1,2]"#]),
    case(r#"[until(. > 100; . * 2)]"#, r#"1"#, &[r#"[128]"#]),
    case(r#"[while(. < 20; . * 2)]"#, r#"1"#, &[r#"[1,2,4,8,16]"#]),
    case(r#"[recurse(if . < 3 then . + 1 else empty end)]"#, r#"0"#, &[r#"[0,1,2,3]"#]),
    case(r#"[..|numbers]"#, r#"{"a":[1,{"b":2}]}"#, &[r#"[1,2]"#]),
    case(r#"isempty(empty)"#, r#"null"#, &[r#"true"#]),
    case(r#"walk(if type == "number" then . + 1 else . end)"#, r#"{"a":[1,{"b":2}]}"#, &[r#"{"a":[2,{"b":3}]}"#]),
    case(r#"[.[] | type]"#, r#"[null,true,1,"a",[],{}]"#, &[r#"["null","boolean","number","string","array","object"]"#]),
    // Arithmetic, comparison, collections
    case(r#"{a: 1} + {b: 2}"#, r#"null"#, &[r#"{"a":1,"b":2}"#]),
    case(r#"{"a":{"b":1}} * {"a":{"c":2}}"#, r#"null"#, &[r#"{"a":{"b":1,"c":2}}"#]),
    case(r#"[1,2,3,2] - [2]"#, r#"null"#, &[r#"[1,3]"#]),
    case(r#".a + .b"#, r#"{"a":1,"b":2}"#, &[r#"3"#]),
    case(r#".a + .b"#, r#"{"a":"x","b":null}"#, &[r#""x""#]),
    case(r#"3 / 2"#, r#"null"#, &[r#"1.5"#]),
    case(r#".n * 2"#, r#"{"n":1.5}"#, &[r#"3"#]),
    case(r#"0.1 + 0.2"#, r#"null"#, &[r#"0.30000000000000004"#]),
    case(r#"10 % 3"#, r#"null"#, &[r#"1"#]),
    case(r#"1e3"#, r#"null"#, &[r#"1000"#]),
    case(r#"100000000000000000000"#, r#"null"#, &[r#"1e+20"#]),
    case(r#"pow(2; 10)"#, r#"null"#, &[r#"1024"#]),
    case(r#"sqrt"#, r#"2"#, &[r#"1.4142135623730951"#]),
    case(r#"floor"#, r#"2.7"#, &[r#"2"#]),
    case(r#"[3,"a",null,true,false,[1],{"a":1}] | sort"#, r#"null"#, &[r#"[null,false,true,3,"a",[1],{"a":1}]"#]),
    case(r#"sort_by(.n)"#, r#"[{"n":2},{"n":1}]"#, &[r#"[{"n":1},{"n":2}]"#]),
    case(r#"group_by(.t) | map(length)"#, r#"[{"t":"a"},{"t":"b"},{"t":"a"}]"#, &[r#"[2,1]"#]),
    case(r#"unique"#, r#"[3,1,3,2]"#, &[r#"[1,2,3]"#]),
    case(r#"unique_by(length)"#, r#"["a","bb","c"]"#, &[r#"["a","bb"]"#]),
    case(r#"min_by(.n)"#, r#"[{"n":2},{"n":1}]"#, &[r#"{"n":1}"#]),
    case(r#"max_by(.n)"#, r#"[{"n":2},{"n":1}]"#, &[r#"{"n":2}"#]),
    case(r#"min"#, r#"[3,1,2]"#, &[r#"1"#]),
    case(r#"max"#, r#"[]"#, &[r#"null"#]),
    case(r#"add"#, r#"[1,2,3]"#, &[r#"6"#]),
    case(r#"add"#, r#"["a","b"]"#, &[r#""ab""#]),
    case(r#"add"#, r#"[]"#, &[r#"null"#]),
    case(r#"any"#, r#"[false,true]"#, &[r#"true"#]),
    case(r#"all"#, r#"[true,false]"#, &[r#"false"#]),
    case(r#"any(. > 2)"#, r#"[1,3]"#, &[r#"true"#]),
    case(r#"flatten"#, r#"[1,[2,[3]]]"#, &[r#"[1,2,3]"#]),
    case(r#"flatten(1)"#, r#"[1,[2,[3]]]"#, &[r#"[1,2,[3]]"#]),
    case(r#"[range(3)]"#, r#"null"#, &[r#"[0,1,2]"#]),
    case(r#"[range(0; 10; 3)]"#, r#"null"#, &[r#"[0,3,6,9]"#]),
    case(r#"contains({"a":[1]})"#, r#"{"a":[1,2],"b":3}"#, &[r#"true"#]),
    case(r#"contains("bar")"#, r#""foobar""#, &[r#"true"#]),
    case(r#"inside([1,2,3])"#, r#"[1,2]"#, &[r#"true"#]),
    case(r#"in({"a":1})"#, r#""a""#, &[r#"true"#]),
    case(r#"transpose"#, r#"[[1,2],[3]]"#, &[r#"[[1,3],[2,null]]"#]),
    case(r#"to_entries | length"#, r#"{"a":1,"b":2}"#, &[r#"2"#]),
    case(r#"[.[] | numbers]"#, r#"[1,"a",null,2]"#, &[r#"[1,2]"#]),
    case(r#"not"#, r#"null"#, &[r#"true"#]),
    case(r#"[.[] | round]"#, r#"[1.5,2.5]"#, &[r#"[2,3]"#]),
    case(r#"[combinations]"#, r#"[[1,2],[3,4]]"#, &[r#"[[1,3],[1,4],[2,3],[2,4]]"#]),
    case(r#"any(.[]; . > 1)"#, r#"[1,2]"#, &[r#"true"#]),
    case(r#"sort"#, r#"[{"b":1},{"a":2}]"#, &[r#"[{"a":2},{"b":1}]"#]),
    case(r#"group_by(.a)"#, r#"[{"a":null},{"a":1}]"#, &[r#"[[{"a":null}],[{"a":1}]]"#]),
    // Typical shell-operator hook filters
    case(r#".metadata.labels.foo = "bar""#, r#"{"metadata":{"name":"web","labels":{"app":"web"}}}"#, &[r#"{"metadata":{"name":"web","labels":{"app":"web","foo":"bar"}}}"#]),
    case(r#".metadata.labels.foo = "bar""#, r#"{"metadata":{"name":"web"}}"#, &[r#"{"metadata":{"name":"web","labels":{"foo":"bar"}}}"#]),
    case(r#".spec.replicas = 3"#, r#"{"kind":"Deployment","spec":{"replicas":1,"template":{}}}"#, &[r#"{"kind":"Deployment","spec":{"replicas":3,"template":{}}}"#]),
    case(r#"del(.metadata.annotations["x"])"#, r#"{"metadata":{"annotations":{"x":"1","y":"2"}}}"#, &[r#"{"metadata":{"annotations":{"y":"2"}}}"#]),
    case(r#"del(.metadata.annotations["x"])"#, r#"{"metadata":{"name":"a"}}"#, &[r#"{"metadata":{"name":"a"}}"#]),
    case(r#"{name: .metadata.name, labels: .metadata.labels}"#, r#"{"metadata":{"name":"web","labels":{"app":"web"}}}"#, &[r#"{"name":"web","labels":{"app":"web"}}"#]),
    case(r#"{name: .metadata.name, labels: .metadata.labels}"#, r#"{"metadata":{"name":"web"}}"#, &[r#"{"name":"web","labels":null}"#]),
    case(r#".metadata | {name, namespace}"#, r#"{"metadata":{"name":"web","namespace":"prod","uid":"1"}}"#, &[r#"{"name":"web","namespace":"prod"}"#]),
    case(r#".metadata.annotations["checksum/config"] = "abc""#, r#"{"metadata":{"name":"web"}}"#, &[r#"{"metadata":{"name":"web","annotations":{"checksum/config":"abc"}}}"#]),
    case(r#".spec.template.metadata.labels["pod-template-hash"] = "x""#, r#"{"spec":{}}"#, &[r#"{"spec":{"template":{"metadata":{"labels":{"pod-template-hash":"x"}}}}}"#]),
    case(r#".spec.containers |= map(.resources.limits.cpu = "1")"#, r#"{"spec":{"containers":[{"name":"a"},{"name":"b","resources":{"requests":{"cpu":"2"}}}]}}"#, &[r#"{"spec":{"containers":[{"name":"a","resources":{"limits":{"cpu":"1"}}},{"name":"b","resources":{"requests":{"cpu":"2"},"limits":{"cpu":"1"}}}]}}"#]),
    case(r#".spec.template.spec.containers[].env += [{"name":"A","value":"1"}]"#, r#"{"spec":{"template":{"spec":{"containers":[{"name":"a"},{"name":"b","env":[{"name":"B","value":"2"}]}]}}}}"#, &[r#"{"spec":{"template":{"spec":{"containers":[{"name":"a","env":[{"name":"A","value":"1"}]},{"name":"b","env":[{"name":"B","value":"2"},{"name":"A","value":"1"}]}]}}}}"#]),
    case(r#".metadata.finalizers += ["example.com/cleanup"]"#, r#"{"metadata":{"name":"web"}}"#, &[r#"{"metadata":{"name":"web","finalizers":["example.com/cleanup"]}}"#]),
    case(r#".metadata.finalizers -= ["example.com/cleanup"]"#, r#"{"metadata":{"finalizers":["example.com/cleanup","other"]}}"#, &[r#"{"metadata":{"finalizers":["other"]}}"#]),
    case(r#".spec.containers[0].image |= sub(":.*"; ":2")"#, r#"{"spec":{"containers":[{"image":"nginx:1"}]}}"#, &[r#"{"spec":{"containers":[{"image":"nginx:2"}]}}"#]),
    case(r#".status.conditions // [] | map(select(.type == "Ready")) | .[0].status"#, r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#, &[r#""True""#]),
    case(r#".status.conditions // [] | map(select(.type == "Ready")) | .[0].status"#, r#"{}"#, &[r#"null"#]),
    case(r#"[.items[] | {name: .metadata.name, ns: .metadata.namespace}]"#, r#"{"items":[{"metadata":{"name":"a","namespace":"x"}},{"metadata":{"name":"b"}}]}"#, &[r#"[{"name":"a","ns":"x"},{"name":"b","ns":null}]"#]),
    case(r#".items | map({(.name): .value}) | add"#, r#"{"items":[{"name":"a","value":1},{"name":"b","value":2}]}"#, &[r#"{"a":1,"b":2}"#]),
    case(r#".spec.replicas // 1"#, r#"{"spec":{}}"#, &[r#"1"#]),
    case(r#".metadata.ownerReferences[0].name"#, r#"{"metadata":{}}"#, &[r#"null"#]),
    case(r#".data.key = (.data.key | tostring)"#, r#"{"data":{"key":5}}"#, &[r#"{"data":{"key":"5"}}"#]),
    case(r#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": .metadata.name}, "data": {"count": (.spec.list | length | tostring)}}"#, r#"{"metadata":{"name":"web"},"spec":{"list":[1,2]}}"#, &[r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web"},"data":{"count":"2"}}"#]),
    case(r#".metadata.labels | to_entries | map(select(.key | startswith("app.kubernetes.io/"))) | from_entries"#, r#"{"metadata":{"labels":{"app.kubernetes.io/name":"web","team":"a"}}}"#, &[r#"{"app.kubernetes.io/name":"web"}"#]),
    case(r#".spec.ports |= map(select(.name != "debug"))"#, r#"{"spec":{"ports":[{"name":"http"},{"name":"debug"}]}}"#, &[r#"{"spec":{"ports":[{"name":"http"}]}}"#]),
    case(r#"if .metadata.deletionTimestamp then "deleting" else "live" end"#, r#"{"metadata":{"deletionTimestamp":"2024-01-01T00:00:00Z"}}"#, &[r#""deleting""#]),
    case(r#".metadata.creationTimestamp | fromdate"#, r#"{"metadata":{"creationTimestamp":"2015-03-05T23:51:47Z"}}"#, &[r#"1425599507"#]),
    case(r#"1425599507 | todate"#, r#"null"#, &[r#""2015-03-05T23:51:47Z""#]),

];

#[rustfmt::skip]
const DIFFERENCES: &[Difference] = &[
    Difference {
        filter: r#".[] |= empty"#,
        input: r#"[1,2,3,4,5]"#,
        jq: Outcome::Outputs(&[r#"[2,4]"#]),
        operon: Outcome::Outputs(&[r#"[]"#]),
        why: "an update that yields nothing deletes its path; gojq (shell-operator's jq) and jq 1.7 delete all such paths at the end, jq 1.6 one at a time while later indexes shift",
    },
    Difference {
        filter: r#"[limit(0; .[])]"#,
        input: r#"[1,2,3]"#,
        jq: Outcome::Outputs(&[r#"[1]"#]),
        operon: Outcome::Outputs(&[r#"[]"#]),
        why: "limit(0; f) yields nothing in gojq and jq 1.7; jq 1.6 yields one output",
    },
    Difference {
        filter: r#"[limit(-1; .[])]"#,
        input: r#"[1,2,3]"#,
        jq: Outcome::Outputs(&[r#"[1,2,3]"#]),
        operon: Outcome::Outputs(&[r#"[]"#]),
        why: "a negative limit yields nothing in jaq; jq 1.6 yields every output",
    },
    Difference {
        filter: r#"to_entries"#,
        input: r#"{"b":1,"a":2}"#,
        jq: Outcome::Outputs(&[r#"[{"key":"b","value":1},{"key":"a","value":2}]"#]),
        operon: Outcome::Outputs(&[r#"[{"key":"a","value":2},{"key":"b","value":1}]"#]),
        why: "objects reach filters with their keys sorted (the engine's JSON objects are sorted maps, as gojq's Go maps are); jq keeps the input's order",
    },
    Difference {
        filter: r#"keys_unsorted"#,
        input: r#"{"b":1,"a":2}"#,
        jq: Outcome::Outputs(&[r#"["b","a"]"#]),
        operon: Outcome::Outputs(&[r#"["a","b"]"#]),
        why: "as for to_entries: input objects have sorted keys",
    },
    Difference {
        filter: r#".[0]"#,
        input: r#"{}"#,
        jq: Outcome::Fails,
        operon: Outcome::Outputs(&[r#"null"#]),
        why: "jaq looks up any key in an object (null when absent); jq refuses a number",
    },
    Difference {
        filter: r#".[1:2]"#,
        input: r#"null"#,
        jq: Outcome::Outputs(&[r#"null"#]),
        operon: Outcome::Fails,
        why: "jaq refuses a slice of null, so reading it and assigning to it fail; jq reads null and assigns to an empty array",
    },
    Difference {
        filter: r#".[1:3] = ["x"]"#,
        input: r#"null"#,
        jq: Outcome::Outputs(&[r#"["x"]"#]),
        operon: Outcome::Fails,
        why: "the path of a slice of null is jaq's, which refuses it (see .[1:2] on null)",
    },
    Difference {
        filter: r#".[1.7]"#,
        input: r#"[1,2,3]"#,
        jq: Outcome::Outputs(&[r#"null"#]),
        operon: Outcome::Fails,
        why: "jaq refuses a fractional array index; jq 1.6 reads null and jq 1.7 rounds down",
    },
    Difference {
        filter: r#"match("(a)(x)?") | .captures | length"#,
        input: r#""bad""#,
        jq: Outcome::Outputs(&[r#"2"#]),
        operon: Outcome::Outputs(&[r#"1"#]),
        why: "jaq leaves out capture groups that took no part in the match; jq lists them with a null string",
    },
    Difference {
        filter: r#"capture("(?<a>a)(?<x>x)?")"#,
        input: r#""bad""#,
        jq: Outcome::Outputs(&[r#"{"a":"a","x":null}"#]),
        operon: Outcome::Outputs(&[r#"{"a":"a"}"#]),
        why: "as for match: a named group that took no part is left out",
    },
    Difference {
        filter: r#"test("\\p{L}")"#,
        input: r#""é""#,
        jq: Outcome::Outputs(&[r#"true"#]),
        operon: Outcome::Fails,
        why: "jaq's regular expressions have no Unicode classes (\\p{...})",
    },
    Difference {
        filter: r#"map(tostring)"#,
        input: r#"[1e17, 1e-7]"#,
        jq: Outcome::Outputs(&[r#"["1e+17","1e-07"]"#]),
        operon: Outcome::Outputs(&[r#"["1e17","1e-7"]"#]),
        why: "numbers too large or too small to print whole have their exponent printed without a sign or leading zeros (integral numbers up to 2^53 print as jq prints them)",
    },
    Difference {
        filter: r#"env | type"#,
        input: r#"null"#,
        jq: Outcome::Outputs(&[r#""object""#]),
        operon: Outcome::Fails,
        why: "env and $ENV are not offered: the engine's environment holds credentials",
    },
    Difference {
        filter: r#"$ENV | type"#,
        input: r#"null"#,
        jq: Outcome::Outputs(&[r#""object""#]),
        operon: Outcome::Fails,
        why: "as for env",
    },
    Difference {
        filter: r#"[tostream]"#,
        input: r#"{"a":[1]}"#,
        jq: Outcome::Outputs(&[r#"[[["a",0],1],[["a",0]],[["a"]]]"#]),
        operon: Outcome::Fails,
        why: "jaq defines no tostream, fromstream, truncate_stream, input, inputs, input_line_number or $__loc__: such filters do not compile",
    },
];

/// The values an outcome stands for, or `None` for a failure.
fn expected(outcome: Outcome) -> Option<Vec<Value>> {
    match outcome {
        Outcome::Outputs(texts) => Some(
            texts
                .iter()
                .map(|text| serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}")))
                .collect(),
        ),
        Outcome::Fails => None,
    }
}

fn input(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("input {text}: {e}"))
}

/// What the engine gives: `None` for a runtime error. A filter that does not compile
/// is a failure of the test, not an outcome: every case is meant to compile.
fn run_engine(filter: &str, input_text: &str) -> Result<Option<Vec<Value>>, String> {
    let compiled = jq::compile(filter).map_err(|e| format!("does not compile: {e}"))?;
    Ok(compiled.run(&input(input_text)).ok())
}

/// What the `jq` binary gives: `None` when it exits with an error.
fn run_jq(filter: &str, input_text: &str) -> Option<Vec<Value>> {
    let mut child = Command::new("jq")
        .arg("-c")
        .arg(filter)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run jq ({e}); .ci/setup installs it"));
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input_text.as_bytes())
        .expect("jq reads its input");
    let output = child.wait_with_output().expect("jq runs");
    output.status.success().then(|| {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| {
                serde_json::from_str(line).unwrap_or_else(|e| panic!("jq printed {line}: {e}"))
            })
            .collect()
    })
}

fn show(outcome: &Option<Vec<Value>>) -> String {
    match outcome {
        Some(values) => values
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        None => "an error".to_owned(),
    }
}

#[test]
fn the_table_is_not_empty_and_has_no_duplicates() {
    assert!(CASES.len() > 200, "{} cases", CASES.len());
    let mut seen = std::collections::HashSet::new();
    for case in CASES {
        assert!(
            seen.insert((case.filter, case.input)),
            "duplicate case {} on {}",
            case.filter,
            case.input
        );
    }
}

#[test]
fn engine_gives_what_jq_gives() {
    let mut wrong = Vec::new();
    for case in CASES {
        let want = expected(case.jq);
        match run_engine(case.filter, case.input) {
            Ok(got) if got == want => {}
            Ok(got) => wrong.push(format!(
                "{} on {}: jq gives {}, the engine {}",
                case.filter,
                case.input,
                show(&want),
                show(&got)
            )),
            Err(e) => wrong.push(format!("{} on {}: {e}", case.filter, case.input)),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases differ:\n{}",
        wrong.len(),
        CASES.len(),
        wrong.join("\n")
    );
}

#[test]
fn known_differences_are_as_recorded() {
    let mut wrong = Vec::new();
    for difference in DIFFERENCES {
        let want = expected(difference.operon);
        let got = match jq::compile(difference.filter) {
            Ok(filter) => filter.run(&input(difference.input)).ok(),
            // Not offered at all (`env`) counts as failing.
            Err(_) => None,
        };
        if got != want {
            wrong.push(format!(
                "{} on {}: recorded {}, the engine gives {} ({})",
                difference.filter,
                difference.input,
                show(&want),
                show(&got),
                difference.why
            ));
        }
        assert!(
            expected(difference.jq) != want,
            "{}: not a difference",
            difference.filter
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn recorded_outputs_are_what_the_jq_binary_gives() {
    let version = Command::new("jq")
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("jq is not installed ({e}): .ci/setup installs it, and this test checks the table against it"));
    let version = String::from_utf8_lossy(&version.stdout).trim().to_owned();
    let recorded = CASES
        .iter()
        .map(|case| (case.filter, case.input, case.jq))
        .chain(DIFFERENCES.iter().map(|d| (d.filter, d.input, d.jq)));
    let mut wrong = Vec::new();
    for (filter, input_text, outcome) in recorded {
        let want = expected(outcome);
        let got = run_jq(filter, input_text);
        if got != want {
            wrong.push(format!(
                "{filter} on {input_text}: recorded {}, {version} gives {}",
                show(&want),
                show(&got)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
