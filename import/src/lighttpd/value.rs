//! The parsed form of a lighttpd configuration: values, conditions and the
//! contexts (the global one and each conditional block) with their
//! settings, as the parser produces them and the translation reads them.

use std::path::PathBuf;

use crate::report::{Outcome, Src};

/// A configuration value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Val {
    /// A string (also booleans: `"enable"`, `"disable"`).
    Str(String),
    /// A decimal integer.
    Int(i64),
    /// An ordered list; entries written `"k" => v` carry their key.
    Arr(Vec<(Option<String>, Val)>),
}

impl Val {
    /// The string, or the integer in decimal.
    pub(crate) fn as_string(&self) -> Option<String> {
        match self {
            Val::Str(s) => Some(s.clone()),
            Val::Int(i) => Some(i.to_string()),
            Val::Arr(_) => None,
        }
    }

    /// lighttpd's boolean reading (`config_plugin_value_to_bool`): `enable`,
    /// `enabled`, `true`, `1` and non-zero integers are true; `disable`,
    /// `disabled`, `false`, `0` are false; `None` for anything else.
    pub(crate) fn as_bool(&self) -> Option<bool> {
        match self {
            Val::Int(i) => Some(*i != 0),
            Val::Str(s) => match s.to_ascii_lowercase().as_str() {
                "enable" | "enabled" | "true" | "1" => Some(true),
                "disable" | "disabled" | "false" | "0" => Some(false),
                _ => None,
            },
            Val::Arr(_) => None,
        }
    }

    /// The array's plain values as strings (keys ignored); a single string is
    /// a one-element list.
    pub(crate) fn as_list(&self) -> Vec<String> {
        match self {
            Val::Arr(v) => v.iter().filter_map(|(_, x)| x.as_string()).collect(),
            other => other.as_string().into_iter().collect(),
        }
    }

    /// The array's `"k" => "v"` pairs (entries without a key or with a
    /// non-scalar value are skipped).
    pub(crate) fn as_pairs(&self) -> Vec<(String, String)> {
        match self {
            Val::Arr(v) => v
                .iter()
                .filter_map(|(k, x)| Some((k.clone()?, x.as_string()?)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The value as lighttpd's `-p` prints it (for messages and tests).
    pub(crate) fn show(&self) -> String {
        match self {
            Val::Str(s) => format!("\"{}\"", s.replace('"', "\\\"")),
            Val::Int(i) => i.to_string(),
            Val::Arr(v) => {
                let items: Vec<String> = v
                    .iter()
                    .map(|(k, x)| match k {
                        Some(k) => format!("\"{k}\" => {}", x.show()),
                        None => x.show(),
                    })
                    .collect();
                format!("({})", items.join(", "))
            }
        }
    }
}

/// A condition operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CondOp {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `=~`
    Re,
    /// `!~`
    NotRe,
    /// `=^` (prefix)
    Prefix,
    /// `=$` (suffix)
    Suffix,
}

impl CondOp {
    /// The operator as written.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CondOp::Eq => "==",
            CondOp::Ne => "!=",
            CondOp::Re => "=~",
            CondOp::NotRe => "!~",
            CondOp::Prefix => "=^",
            CondOp::Suffix => "=$",
        }
    }
}

/// A condition as written: `$HTTP["url"] =~ "^/img/"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawCond {
    /// `HTTP`, `SERVER`, `REQUEST_HEADER`, …
    pub(crate) field: String,
    /// The bracketed name: `url`, `host`, `socket`, a header name.
    pub(crate) key: String,
    /// The operator.
    pub(crate) op: CondOp,
    /// The right-hand side, evaluated.
    pub(crate) value: String,
    /// Where it is written.
    pub(crate) src: Src,
}

impl RawCond {
    /// `$HTTP["url"] =~ "^/img/"`.
    pub(crate) fn show(&self) -> String {
        format!(
            "${}[\"{}\"] {} \"{}\"",
            self.field,
            self.key,
            self.op.as_str(),
            self.value
        )
    }
}

/// One option assigned in a context (after `+=` resolution).
#[derive(Debug, Clone)]
pub(crate) struct Setting {
    /// The key (`server.document-root`, `var.basedir`).
    pub(crate) key: String,
    /// The resolved value.
    pub(crate) val: Val,
    /// Where it was (last) assigned.
    pub(crate) src: Src,
}

/// The global context or a conditional block.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    /// Enclosing context (`None` for the global context, index 0).
    pub(crate) parent: Option<usize>,
    /// The block's own condition (`None` for the global context and a bare
    /// `else`).
    pub(crate) cond: Option<RawCond>,
    /// Conditions of the earlier blocks of this `else` chain, which must all be
    /// false for this block to apply.
    pub(crate) negs: Vec<RawCond>,
    /// Options set in this block, in order of first assignment.
    pub(crate) settings: Vec<Setting>,
    /// Where the block opens.
    pub(crate) src: Src,
    /// Line of the closing `}` (same file as `src` when the block is in one file).
    pub(crate) end_line: u32,
}

impl Context {
    /// The setting of `key` in this context only.
    pub(crate) fn get(&self, key: &str) -> Option<&Setting> {
        self.settings.iter().find(|s| s.key == key)
    }
}

/// A note for the report made while parsing (includes, `include_shell`).
#[derive(Debug, Clone)]
pub(crate) struct Note {
    pub(crate) src: Src,
    pub(crate) outcome: Outcome,
    pub(crate) what: String,
    pub(crate) message: String,
}

/// The parsed, evaluated configuration.
#[derive(Debug, Clone)]
pub(crate) struct Parsed {
    /// Contexts in the order their blocks open; index 0 is the global context.
    pub(crate) contexts: Vec<Context>,
    /// Report notes about includes.
    pub(crate) notes: Vec<Note>,
    /// Every file read, in order.
    pub(crate) files: Vec<String>,
}

/// Parser options.
#[derive(Debug, Clone)]
pub(crate) struct ParseOptions {
    /// The system MIME table read for Debian's `create-mime.conf.pl`
    /// (normally `/etc/mime.types`).
    pub(crate) mime_types: PathBuf,
}
