//! Keeps `proto/sluice.proto` and the hand-written prost structs of `wire.rs`
//! in step: every protobuf message `X` has a struct `XProto` with the same
//! fields (name, tag, scalar kind, repeated or not), and every `XProto` struct
//! has a message `X`. Both files are read as text, so nothing here restates
//! the schema.

use std::collections::BTreeMap;

/// One field, as either file declares it.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Field {
    /// Field number.
    tag: u32,
    /// Wire kind as prost names it: `uint64`, `bytes`, `bool`, `uint32`, or
    /// `message` for a nested message.
    kind: String,
    /// Declared `repeated`.
    repeated: bool,
}

/// Message name (proto spelling, e.g. `Header`) to its fields by name.
type Schema = BTreeMap<String, BTreeMap<String, Field>>;

const SCALARS: &[&str] = &["uint64", "uint32", "bytes", "bool"];

/// Drops a `//` comment from a line.
fn strip_comment(line: &str) -> &str {
    line.split("//").next().unwrap_or("").trim()
}

/// Parses `message X { [repeated] type name = N; ... }` blocks.
fn parse_proto(text: &str) -> Schema {
    let mut schema = Schema::new();
    let mut current: Option<String> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = strip_comment(raw);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("message ") {
            assert!(current.is_none(), "line {}: nested message in sluice.proto", n + 1);
            let name = rest.trim_end_matches('{').trim().to_string();
            assert!(schema.insert(name.clone(), BTreeMap::new()).is_none(), "message {name} twice");
            current = Some(name);
            continue;
        }
        if line == "}" {
            assert!(current.take().is_some(), "line {}: `}}` outside a message", n + 1);
            continue;
        }
        let Some(message) = &current else { continue };
        let decl =
            line.strip_suffix(';').unwrap_or_else(|| panic!("line {}: field without `;`: {line}", n + 1));
        let (lhs, tag) = decl.split_once('=').unwrap_or_else(|| panic!("line {}: no `=`: {line}", n + 1));
        let tag: u32 = tag.trim().parse().unwrap_or_else(|_| panic!("line {}: bad tag: {line}", n + 1));
        let words: Vec<&str> = lhs.split_whitespace().collect();
        let (repeated, ty, name) = match words.as_slice() {
            ["repeated", ty, name] => (true, *ty, *name),
            [ty, name] => (false, *ty, *name),
            _ => panic!("line {}: cannot read field: {line}", n + 1),
        };
        let kind = if SCALARS.contains(&ty) { ty.to_string() } else { "message".to_string() };
        let field = Field { tag, kind, repeated };
        let fields = schema.get_mut(message).expect("current message is in the schema");
        assert!(fields.insert(name.to_string(), field).is_none(), "{message}.{name} twice");
    }
    assert!(current.is_none(), "sluice.proto ends inside a message");
    schema
}

/// Parses the `pub struct XProto { #[prost(...)] pub name: T, ... }` blocks of
/// `wire.rs`, keyed by `X`. Structs not named `...Proto` are skipped.
fn parse_rust(text: &str) -> Schema {
    let mut schema = Schema::new();
    let mut current: Option<String> = None;
    let mut attr: Option<String> = None;
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with("pub struct ") || line.starts_with("struct ") {
            let name = line.trim_start_matches("pub ").trim_start_matches("struct ");
            let name = name.trim_end_matches('{').trim();
            current = name.strip_suffix("Proto").map(|m| {
                assert!(schema.insert(m.to_string(), BTreeMap::new()).is_none(), "{name} twice");
                m.to_string()
            });
            attr = None;
            continue;
        }
        let Some(message) = &current else { continue };
        if line == "}" {
            assert!(attr.is_none(), "line {}: #[prost] without a field", n + 1);
            current = None;
            continue;
        }
        if let Some(inner) = line.strip_prefix("#[prost(") {
            attr = Some(inner.trim_end_matches(")]").to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub ") {
            let name = rest.split(':').next().unwrap_or("").trim();
            let a = attr.take().unwrap_or_else(|| panic!("line {}: field {name} without #[prost]", n + 1));
            let parts: Vec<&str> = a.split(',').map(str::trim).collect();
            let kind = parts[0].split('=').next().unwrap_or("").trim().to_string();
            let repeated = parts.contains(&"repeated");
            let tag = parts
                .iter()
                .find_map(|p| p.strip_prefix("tag = "))
                .unwrap_or_else(|| panic!("line {}: no tag in #[prost({a})]", n + 1));
            let tag: u32 = tag
                .trim_matches('"')
                .parse()
                .unwrap_or_else(|_| panic!("line {}: bad tag in #[prost({a})]", n + 1));
            let field = Field { tag, kind, repeated };
            let fields = schema.get_mut(message).expect("current struct is in the schema");
            assert!(fields.insert(name.to_string(), field).is_none(), "{message}Proto.{name} twice");
        }
    }
    schema
}

#[test]
fn wire_structs_match_the_proto_schema() {
    let proto = parse_proto(include_str!("../proto/sluice.proto"));
    let rust = parse_rust(include_str!("wire.rs"));
    // A parser that found nothing would make the comparison pass vacuously.
    assert!(proto.len() >= 8, "read only {} messages from sluice.proto", proto.len());
    assert!(proto.contains_key("Header") && proto["Header"].len() >= 9, "Header not read: {proto:?}");

    let mut problems = Vec::new();
    for (message, fields) in &proto {
        let Some(theirs) = rust.get(message) else {
            problems.push(format!("message {message} has no struct {message}Proto in wire.rs"));
            continue;
        };
        for (name, field) in fields {
            match theirs.get(name) {
                None => problems.push(format!("{message}.{name} is missing from {message}Proto")),
                Some(f) if f != field => problems
                    .push(format!("{message}.{name}: sluice.proto says {field:?}, wire.rs says {f:?}")),
                Some(_) => {}
            }
        }
        for name in theirs.keys().filter(|n| !fields.contains_key(*n)) {
            problems.push(format!("{message}Proto.{name} is not in sluice.proto's {message}"));
        }
    }
    for message in rust.keys().filter(|m| !proto.contains_key(*m)) {
        problems.push(format!("struct {message}Proto has no message {message} in sluice.proto"));
    }
    assert!(problems.is_empty(), "wire.rs and sluice.proto differ:\n{}", problems.join("\n"));
}

#[test]
fn the_parsers_see_a_changed_tag() {
    let proto = parse_proto("message A {\n  uint64 x = 1; // c\n  repeated bytes y = 2;\n}\n");
    let rust = parse_rust(
        "pub struct AProto {\n    #[prost(uint64, tag = \"1\")]\n    pub x: u64,\n    \
         #[prost(bytes = \"vec\", repeated, tag = \"3\")]\n    pub y: Vec<Vec<u8>>,\n}\n",
    );
    assert_eq!(proto["A"]["x"], rust["A"]["x"]);
    assert_eq!(proto["A"]["y"], Field { tag: 2, kind: "bytes".into(), repeated: true });
    assert_eq!(rust["A"]["y"], Field { tag: 3, kind: "bytes".into(), repeated: true });
}
