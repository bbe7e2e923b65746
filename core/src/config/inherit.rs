//! How a rule's module table combines with the vhost's table of the same
//! module (the reserved key `inherit` in a rule's table).
//!
//! - `"keys"` (default): lighttpd's model for a conditional block. Every key the
//!   rule does not set keeps the vhost's value; a key the rule sets replaces
//!   the vhost's value whole, lists and maps included (a list set inside
//!   `$HTTP["url"]` replaces the outer one in lighttpd, as `add_header` in an
//!   nginx `location` does).
//! - `"extend"`: as `keys`, but a list set in the rule is appended to the
//!   vhost's list and a map is merged into the vhost's map, the rule's entries
//!   winning. This is what `headers` usually wants: `/docs/` adds a field and
//!   keeps the site's `X-Frame-Options` (nginx's best-known `add_header`
//!   pitfall, avoided).
//! - `"none"`: the rule's table is the whole configuration of the module and
//!   unset keys take the module's defaults (Cherokee rules; imports that must
//!   reset what the vhost set).

use serde_json::{Map, Value};

/// The reserved key in a rule's module table.
pub const KEY: &str = "inherit";

/// How a rule's table combines with the vhost's (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inherit {
    /// Unset keys from the vhost; set keys replace (default).
    Keys,
    /// As `Keys`, with lists appended and maps merged.
    Extend,
    /// The rule's table alone.
    None,
}

impl Inherit {
    /// The name written in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            Inherit::Keys => "keys",
            Inherit::Extend => "extend",
            Inherit::None => "none",
        }
    }
}

/// The effective table of a rule: `rule` (without its `inherit` key) combined
/// with `vhost` (the vhost's table of the same module, if it has one).
///
/// # Errors
/// `inherit` is not one of `"keys"`, `"extend"`, `"none"` (the message names the
/// values); the error's first element is the key (`inherit`).
pub fn effective(vhost: Option<&Value>, rule: &Value) -> Result<(Value, Inherit), String> {
    let Some(rule_map) = rule.as_object() else {
        // not a table: the module reports its own type error
        return Ok((rule.clone(), Inherit::None));
    };
    let mode = match rule_map.get(KEY) {
        None => Inherit::Keys,
        Some(Value::String(s)) if s == "keys" => Inherit::Keys,
        Some(Value::String(s)) if s == "extend" => Inherit::Extend,
        Some(Value::String(s)) if s == "none" => Inherit::None,
        Some(other) => {
            return Err(format!(
                "{other} is not \"keys\" (default: unset keys from the vhost), \"extend\" (lists appended, maps merged) or \"none\" (this table alone)"
            ))
        }
    };
    let mut own = rule_map.clone();
    own.remove(KEY);
    let base = match (mode, vhost.and_then(Value::as_object)) {
        (Inherit::None, _) | (_, None) => return Ok((Value::Object(own), mode)),
        (_, Some(v)) => v,
    };
    let mut out: Map<String, Value> = base.clone();
    for (k, v) in own {
        let merged = match (mode, out.remove(&k), v) {
            (Inherit::Extend, Some(Value::Array(mut a)), Value::Array(b)) => {
                a.extend(b);
                Value::Array(a)
            }
            (Inherit::Extend, Some(Value::Object(mut a)), Value::Object(b)) => {
                for (bk, bv) in b {
                    a.insert(bk, bv);
                }
                Value::Object(a)
            }
            (_, _, v) => v,
        };
        out.insert(k, merged);
    }
    Ok((Value::Object(out), mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_inherit_unset_keys_and_replace_set_ones() {
        let vh = json!({"existing-cache-control": "merge", "url": {"/": "access plus 1 days"}});
        let r = json!({"url": {"/img/": "access plus 1 months"}});
        let (t, m) = effective(Some(&vh), &r).unwrap();
        assert_eq!(m, Inherit::Keys);
        assert_eq!(
            t,
            json!({"existing-cache-control": "merge", "url": {"/img/": "access plus 1 months"}})
        );
    }

    #[test]
    fn extend_appends_lists_and_merges_maps() {
        let vh = json!({"set": {"X-Frame-Options": "DENY", "X-A": "1"}, "remove": ["Server"]});
        let r = json!({"inherit": "extend", "set": {"X-A": "2", "X-Section": "docs"}, "remove": ["X-Powered-By"]});
        let (t, m) = effective(Some(&vh), &r).unwrap();
        assert_eq!(m, Inherit::Extend);
        assert_eq!(
            t,
            json!({"set": {"X-Frame-Options": "DENY", "X-A": "2", "X-Section": "docs"}, "remove": ["Server", "X-Powered-By"]})
        );
    }

    #[test]
    fn none_is_the_rule_table_alone() {
        let vh = json!({"set": {"X-Frame-Options": "DENY"}});
        let r = json!({"inherit": "none", "add": {"X-B": "1"}});
        assert_eq!(
            effective(Some(&vh), &r).unwrap().0,
            json!({"add": {"X-B": "1"}})
        );
        // no vhost table: nothing to inherit, the key is still removed
        let r = json!({"inherit": "extend", "add": {"X-B": "1"}});
        assert_eq!(effective(None, &r).unwrap().0, json!({"add": {"X-B": "1"}}));
    }

    #[test]
    fn unknown_mode_is_an_error() {
        let e = effective(None, &json!({"inherit": true})).unwrap_err();
        assert!(e.contains("\"extend\""), "{e}");
    }
}
