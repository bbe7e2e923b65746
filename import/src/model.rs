//! The intermediate model both importers translate into, and the resolver that
//! turns it into Tessera's vhosts and ordered rules.
//!
//! # The model: blocks where the last match wins
//!
//! A vhost's settings are a list of [`Block`]s in source order, each with a
//! condition ([`Cond`]) and module options ([`Opt`]). For a request, the value of
//! an option is the one set by the **last** matching block that sets it
//! (lighttpd's merge semantics: every matching conditional applies, later ones
//! override per option). A block with `reset` (a Cherokee rule with `final`)
//! also resets every option it does not set to its default when it matches.
//!
//! # The resolver: from "last wins per option" to "first wins per module"
//!
//! Tessera's rules are evaluated top-down; for each module the **first**
//! matching rule with a table for it wins, and a table is the whole
//! configuration of its module (README, "How rules combine"). For each module
//! the resolver walks the blocks from the last to the first and splits:
//!
//! ```text
//! gen(blocks[..end], ctx, known, missing):
//!   j = the last block before `end` that sets an option in `missing` (or resets)
//!   none -> one rule: match = ctx, table = known + defaults for `missing`
//!   else -> gen(blocks[..j], ctx ∧ cond_j, known + opts_j, missing − opts_j)   # block j matches
//!           gen(blocks[..j], ctx,          known,          missing)            # it does not
//! ```
//!
//! The rules of the first branch cover every request of `ctx ∧ cond_j`, so the
//! second branch needs no `¬cond_j`: first-match order excludes them. Every
//! rule gets `final = false`, so modules never shadow each other; the last
//! rule, with an empty context, becomes the vhost's own table. When a module
//! must be *off* for some requests and has no "off" table (`dir-listing`,
//! `access-log`, `auth-basic`, `redirect`, `rewrite`, `error-pages`,
//! `static-file`), its rule is left out and its match is excluded (`not`) from
//! that module's later rules. Rules with the same match are merged into one.
//! When several blocks set different options of one module, the split grows
//! with their combinations; beyond [`MAX_RULES_PER_MODULE`] the rest is
//! approximated and reported.

use crate::report::{Report, Src};

/// Most rules made for one module of one vhost before the resolver stops
/// splitting (and reports an approximation).
pub const MAX_RULES_PER_MODULE: usize = 64;

/// A TOML value, kept in the order it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum V {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// An array.
    Arr(Vec<V>),
    /// An inline table, keys in order.
    Tab(Vec<(String, V)>),
}

impl V {
    /// A string value.
    pub fn s(s: impl Into<String>) -> V {
        V::Str(s.into())
    }

    /// An array of strings.
    pub fn strs<I: IntoIterator<Item = S>, S: Into<String>>(it: I) -> V {
        V::Arr(it.into_iter().map(|s| V::Str(s.into())).collect())
    }

    /// A one-key table `{ key = v }`.
    pub fn tab1(key: &str, v: V) -> V {
        V::Tab(vec![(key.to_owned(), v)])
    }

    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            V::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The entries, if this is a table.
    pub fn as_tab(&self) -> Option<&[(String, V)]> {
        match self {
            V::Tab(t) => Some(t),
            _ => None,
        }
    }

    /// The items, if this is an array.
    pub fn as_arr(&self) -> Option<&[V]> {
        match self {
            V::Arr(a) => Some(a),
            _ => None,
        }
    }

    /// Whether this is an empty table, array or string.
    pub fn is_empty(&self) -> bool {
        match self {
            V::Str(s) => s.is_empty(),
            V::Arr(a) => a.is_empty(),
            V::Tab(t) => t.is_empty(),
            _ => false,
        }
    }
}

/// A host test from a lighttpd `$HTTP["host"]` condition, resolved per vhost.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostTest {
    /// `== "h"`: the host (lower-case), with the port if the condition
    /// names one (`h:8080`).
    Exact(String),
    /// `=$ "s"`: the host ends with `s`.
    Suffix(String),
    /// `=^ "p"`: the host starts with `p`.
    Prefix(String),
    /// `=~ "re"`: a regular expression on the host.
    Regex(String),
}

impl HostTest {
    /// Whether `host` (lower-case, without port) passes.
    pub fn eval(&self, host: &str) -> bool {
        self.eval_authority(host)
    }

    /// Whether the authority `a` (lower-case host, with the port the client
    /// sent, if any) passes, as lighttpd decides it (`configfile-glue.c`):
    /// `==` ignores a port on either side when the other has none (a port
    /// of at most 5 digits) and compares both when both have one; the other
    /// tests see the port.
    pub fn eval_authority(&self, a: &str) -> bool {
        match self {
            HostTest::Exact(d) => {
                let (l, d) = (a.as_bytes(), d.as_bytes());
                if l.is_empty() || l.len() == d.len() {
                    l == d
                } else if l.len() > d.len() {
                    l[d.len()] == b':' && l.len() - d.len() <= 6 && l.starts_with(d)
                } else {
                    d[l.len()] == b':' && d.starts_with(l)
                }
            }
            HostTest::Suffix(s) => a.ends_with(s.as_str()),
            HostTest::Prefix(p) => a.starts_with(p.as_str()),
            HostTest::Regex(r) => fancy_regex::Regex::new(r)
                .ok()
                .and_then(|re| re.is_match(a).ok())
                .unwrap_or(false),
        }
    }

    /// Whether Tessera must compare this test's server names with the port
    /// (vhost `names-see-port`): every test but `==` without a port.
    pub fn sees_port(&self) -> bool {
        match self {
            HostTest::Exact(h) => crate::strip_port(h).len() != h.len(),
            _ => true,
        }
    }

    /// The Tessera server names claiming the hosts this test passes: see
    /// [`HostTest::server_name`]; `== "h:8080"` also claims `h` without a
    /// port, as lighttpd matches it.
    pub fn server_names(&self) -> Vec<String> {
        match self {
            HostTest::Exact(h) if self.sees_port() => {
                vec![crate::strip_port(h).to_owned(), h.clone()]
            }
            _ => vec![self.server_name()],
        }
    }

    /// The Tessera server name claiming the hosts this test passes:
    /// `h` (`h:port` with a port), `*.suffix`, or `~regex`.
    pub fn server_name(&self) -> String {
        match self {
            HostTest::Exact(h) => h.clone(),
            HostTest::Suffix(s) if s.starts_with('.') && s.len() > 1 => format!("*{s}"),
            HostTest::Suffix(s) => format!("~{}$", fancy_regex::escape(s)),
            HostTest::Prefix(p) => format!("~^{}", fancy_regex::escape(p)),
            HostTest::Regex(r) => format!("~{r}"),
        }
    }

    /// A regular expression for Tessera's `host` matcher passing the same
    /// hosts. That matcher sees the host normalized as lighttpd's
    /// `$HTTP["host"]` does (lower-cased, no trailing dot, no default port:
    /// `A.Example.com.:80` is `a.example.com`), so `=$`, `=^` and `=~`
    /// tests keep their meaning; an exact name without a port passes any
    /// port, as a `server-names` entry does.
    pub fn host_regex(&self) -> String {
        match self {
            HostTest::Exact(h) if self.sees_port() => {
                let (name, port) = h.split_at(crate::strip_port(h).len());
                if port == ":80" {
                    format!("(?i)^{}$", fancy_regex::escape(name))
                } else {
                    format!(
                        "(?i)^{}{}$",
                        fancy_regex::escape(name),
                        fancy_regex::escape(port)
                    )
                }
            }
            HostTest::Exact(h) => format!("(?i)^{}(:[0-9]{{1,5}})?$", fancy_regex::escape(h)),
            HostTest::Suffix(s) => format!("(?i){}$", fancy_regex::escape(s)),
            HostTest::Prefix(p) => format!("(?i)^{}", fancy_regex::escape(p)),
            HostTest::Regex(r) => format!("(?i){r}"),
        }
    }

    /// Whether Tessera matches this name with a wildcard (`*.x`), as opposed to
    /// an exact name or a `~regex`.
    pub fn is_wildcard(&self) -> bool {
        self.server_name().starts_with('*')
    }
}

/// A condition in Tessera's vocabulary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// Always.
    True,
    /// Never.
    False,
    /// A Tessera matcher as an inline table (`{ path-prefix = "/img/" }`).
    Match(V),
    /// A host test, decided per vhost (or a `host` matcher).
    Host(HostTest),
    /// Negation.
    Not(Box<Cond>),
    /// Conjunction.
    All(Vec<Cond>),
    /// Disjunction.
    Any(Vec<Cond>),
}

impl Cond {
    /// `¬c`.
    pub fn invert(c: Cond) -> Cond {
        Cond::Not(Box::new(c))
    }

    /// Folds constants and decides host tests with `host` (`None`: keep the
    /// test for run time).
    pub fn simplify(&self, host: &dyn Fn(&HostTest) -> Option<bool>) -> Cond {
        match self {
            Cond::Host(t) => match host(t) {
                Some(true) => Cond::True,
                Some(false) => Cond::False,
                None => self.clone(),
            },
            Cond::Not(c) => match c.simplify(host) {
                Cond::True => Cond::False,
                Cond::False => Cond::True,
                Cond::Not(inner) => *inner,
                other => Cond::invert(other),
            },
            Cond::All(cs) => {
                let mut out = Vec::new();
                for c in cs {
                    match c.simplify(host) {
                        Cond::True => {}
                        Cond::False => return Cond::False,
                        Cond::All(inner) => out.extend(inner),
                        other => out.push(other),
                    }
                }
                match out.len() {
                    0 => Cond::True,
                    1 => out.pop().unwrap_or(Cond::True),
                    _ => Cond::All(out),
                }
            }
            Cond::Any(cs) => {
                let mut out = Vec::new();
                for c in cs {
                    match c.simplify(host) {
                        Cond::False => {}
                        Cond::True => return Cond::True,
                        other => out.push(other),
                    }
                }
                match out.len() {
                    0 => Cond::False,
                    1 => out.pop().unwrap_or(Cond::False),
                    _ => Cond::Any(out),
                }
            }
            other => other.clone(),
        }
    }

    /// Whether the condition has a matcher with this key anywhere
    /// (`socket`: it depends on the listener).
    pub fn has_matcher(&self, key: &str) -> bool {
        match self {
            Cond::Match(V::Tab(t)) => t.iter().any(|(k, _)| k == key),
            Cond::Not(c) => c.has_matcher(key),
            Cond::All(cs) | Cond::Any(cs) => cs.iter().any(|c| c.has_matcher(key)),
            _ => false,
        }
    }

    /// The values of the `key` matchers the condition requires: at its top
    /// level or in a conjunction (not under `not` or `any`). `None` when a
    /// `key` matcher appears elsewhere (its truth is not required).
    pub fn required_matchers(&self, key: &str) -> Option<Vec<V>> {
        let mut out = Vec::new();
        let mut rest = Vec::new();
        let mut stack = vec![self];
        while let Some(c) = stack.pop() {
            match c {
                Cond::All(cs) => stack.extend(cs),
                Cond::Match(V::Tab(t)) if t.len() == 1 && t[0].0 == key => out.push(t[0].1.clone()),
                other => rest.push(other),
            }
        }
        (!rest.iter().any(|c| c.has_matcher(key))).then_some(out)
    }

    /// Decides every `key` matcher: true when its value is `value`, else false.
    pub fn decide_matcher(&self, key: &str, value: &V) -> Cond {
        match self {
            Cond::Match(V::Tab(t)) if t.len() == 1 && t[0].0 == key => {
                if &t[0].1 == value {
                    Cond::True
                } else {
                    Cond::False
                }
            }
            Cond::Not(c) => Cond::invert(c.decide_matcher(key, value)),
            Cond::All(cs) => Cond::All(cs.iter().map(|c| c.decide_matcher(key, value)).collect()),
            Cond::Any(cs) => Cond::Any(cs.iter().map(|c| c.decide_matcher(key, value)).collect()),
            other => other.clone(),
        }
    }

    /// Every host test in the condition.
    pub fn host_tests(&self, out: &mut Vec<HostTest>) {
        match self {
            Cond::Host(t) if !out.contains(t) => out.push(t.clone()),
            Cond::Not(c) => c.host_tests(out),
            Cond::All(cs) | Cond::Any(cs) => cs.iter().for_each(|c| c.host_tests(out)),
            _ => {}
        }
    }

    /// The Tessera `match` value. `True`/`False` must have been simplified
    /// away; they become a matcher that always/never holds.
    pub fn to_match(&self) -> V {
        match self {
            Cond::Match(v) => v.clone(),
            Cond::Host(t) => V::tab1("host", V::s(t.host_regex())),
            Cond::Not(c) => V::tab1("not", c.to_match()),
            Cond::All(cs) => V::tab1("all", V::Arr(cs.iter().map(Cond::to_match).collect())),
            Cond::Any(cs) => V::tab1("any", V::Arr(cs.iter().map(Cond::to_match).collect())),
            Cond::True => V::tab1("path-prefix", V::s("/")),
            Cond::False => V::tab1("not", V::tab1("path-prefix", V::s("/"))),
        }
    }
}

/// One module option set in a block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opt {
    /// The Tessera module (`expires`).
    pub module: &'static str,
    /// The option inside the model (usually the Tessera key: `url`).
    pub key: &'static str,
    /// Its value.
    pub val: V,
    /// Where it was set.
    pub src: Src,
}

/// Settings that apply when a condition holds (a lighttpd block, a Cherokee
/// rule, or the unconditional settings).
#[derive(Debug, Clone)]
pub struct Block {
    /// When the block applies. Within a conjunction the block's own test comes
    /// first (its regex captures are the rule's `%N`).
    pub cond: Cond,
    /// Options, in source order.
    pub opts: Vec<Opt>,
    /// Options this block does not set revert to the values of the `base`
    /// blocks when it matches (a Cherokee rule with `final` stops lower rules).
    pub reset: bool,
    /// The block holds defaults or vhost-level settings (always true, first),
    /// which a `reset` does not undo (Cherokee's vserver settings).
    pub base: bool,
    /// A label for comments: `lighttpd.conf:12-20 $HTTP["url"] =~ "^/admin/"`.
    pub label: String,
}

/// What one module's configuration is for a set of requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leaf {
    /// The module does not run.
    Off,
    /// The module's table.
    Table(Vec<(String, V)>),
    /// First match among these (condition, table); none: off (lighttpd
    /// `auth.require`, a list of path prefixes).
    Split(Vec<(Cond, Vec<(String, V)>)>),
}

/// Knowledge about one Tessera module.
pub trait ModuleSpec {
    /// Builds the module's configuration from the options that apply (the last
    /// value of each key, in key order of first appearance).
    fn finalize(&self, module: &str, opts: &[(&'static str, V)]) -> Leaf;
    /// A table that makes the module do nothing, if there is one (`headers`:
    /// `{}`); `None` for modules that must be left out instead.
    fn off_table(&self, module: &str) -> Option<Vec<(String, V)>>;
}

/// A rule of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct OutRule {
    /// The conjunction of conditions (never empty).
    pub ctx: Vec<Cond>,
    /// Module tables, in the vhost's module order.
    pub tables: Vec<(&'static str, Vec<(String, V)>)>,
    /// Labels of the blocks the rule derives from.
    pub from: Vec<String>,
    /// Where each table's options were set.
    pub srcs: Vec<Src>,
}

/// A vhost-level module table: the module, its keys, where they were set.
pub type VhostTable = (&'static str, Vec<(String, V)>, Vec<Src>);

/// A vhost after resolution.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resolved {
    /// The vhost's own tables (for requests no rule claims), in module order.
    pub tables: Vec<VhostTable>,
    /// The vhost's `modules` list.
    pub modules: Vec<&'static str>,
    /// Rules, in order; all `final = false`.
    pub rules: Vec<OutRule>,
}

struct LeafRule {
    ctx: Vec<(Cond, usize)>,
    leaf: Leaf,
    srcs: Vec<Src>,
}

/// Resolves the blocks of one vhost (conditions already simplified for it;
/// blocks whose condition is `False` are ignored) into tables and rules.
/// `order` is the canonical module order (the pipeline); `vhost` names the vhost
/// in report messages.
pub fn resolve(
    blocks: &[Block],
    order: &[&'static str],
    spec: &dyn ModuleSpec,
    vhost: &str,
    report: &mut Report,
) -> Resolved {
    let blocks: Vec<&Block> = blocks.iter().filter(|b| b.cond != Cond::False).collect();
    let mut per_module: Vec<(&'static str, Vec<LeafRule>)> = Vec::new();
    for &m in order {
        let keys: Vec<&'static str> = {
            let mut k = Vec::new();
            for b in &blocks {
                for o in b.opts.iter().filter(|o| o.module == m) {
                    if !k.contains(&o.key) {
                        k.push(o.key);
                    }
                }
            }
            k
        };
        if keys.is_empty() {
            continue;
        }
        let mut leaves = Vec::new();
        let mut capped = false;
        gen(
            &blocks,
            m,
            blocks.len(),
            Vec::new(),
            Vec::new(),
            keys.clone(),
            spec,
            &mut leaves,
            &mut capped,
        );
        if capped {
            let src = blocks
                .iter()
                .flat_map(|b| b.opts.iter())
                .find(|o| o.module == m)
                .map(|o| o.src.clone())
                .unwrap_or_else(|| Src::new("?", 0));
            report.approximated(
                &src,
                m,
                format!(
                    "vhost \"{vhost}\": more than {MAX_RULES_PER_MODULE} combinations of conditions set options of this module; the rest were merged (requests matching several of those conditions may get a different combination)"
                ),
            );
        }
        // Expand splits, then drop trailing leaves equal to the catch-all.
        let mut expanded: Vec<LeafRule> = Vec::new();
        for l in leaves {
            match l.leaf {
                Leaf::Split(parts) => {
                    let mut covered = false;
                    for (c, t) in parts {
                        let mut ctx = Vec::new();
                        if c == Cond::True {
                            covered = true;
                        } else {
                            ctx.push((c, usize::MAX));
                        }
                        ctx.extend(l.ctx.iter().cloned());
                        expanded.push(LeafRule {
                            ctx,
                            leaf: Leaf::Table(t),
                            srcs: l.srcs.clone(),
                        });
                        if covered {
                            break;
                        }
                    }
                    if !covered {
                        expanded.push(LeafRule {
                            ctx: l.ctx,
                            leaf: Leaf::Off,
                            srcs: l.srcs,
                        });
                    }
                }
                other => expanded.push(LeafRule {
                    ctx: l.ctx,
                    leaf: other,
                    srcs: l.srcs,
                }),
            }
        }
        while expanded.len() >= 2 {
            let n = expanded.len();
            if expanded[n - 2].leaf == expanded[n - 1].leaf {
                expanded.remove(n - 2);
            } else {
                break;
            }
        }
        // Off without an off table: leave the rule out, exclude its match from
        // the later rules of this module.
        let off = spec.off_table(m);
        let mut out: Vec<LeafRule> = Vec::new();
        let mut excl: Vec<Cond> = Vec::new();
        for mut l in expanded {
            // Requests of an earlier rule never reach this one, so excluding
            // the Off rule's own match (without earlier exclusions) is enough.
            let own = l.ctx.clone();
            if !excl.is_empty() {
                l.ctx.extend(excl.iter().cloned().map(|c| (c, usize::MAX)));
            }
            match (&l.leaf, &off) {
                (Leaf::Off, Some(t)) => {
                    l.leaf = Leaf::Table(t.clone());
                    out.push(l);
                }
                (Leaf::Off, None) => {
                    if own.is_empty() {
                        break;
                    }
                    let c = Cond::invert(conj(&own));
                    if !excl.contains(&c) {
                        excl.push(c);
                    }
                }
                _ => out.push(l),
            }
        }
        per_module.push((m, out));
    }
    // Assemble: empty contexts are the vhost's own tables; the rest are rules,
    // merged by identical match.
    let mut res = Resolved::default();
    for (m, leaves) in per_module {
        let mut prev: Option<usize> = None;
        let used_in_rules = leaves.iter().any(|l| !l.ctx.is_empty());
        for l in leaves {
            let Leaf::Table(t) = l.leaf else { continue };
            if l.ctx.is_empty() {
                // An off table at the vhost level only keeps the module's place
                // in the pipeline: worth it only when rules use the module.
                if Some(&t) == spec.off_table(m).as_ref() && !used_in_rules {
                    continue;
                }
                res.tables.push((m, t, l.srcs));
                continue;
            }
            let ctx: Vec<Cond> = flat_ctx(&l.ctx);
            let from: Vec<String> = l
                .ctx
                .iter()
                .filter(|(_, b)| *b != usize::MAX)
                .map(|(_, b)| blocks[*b].label.clone())
                .collect();
            let start = prev.map_or(0, |p| p + 1);
            let found = (start..res.rules.len()).find(|&i| {
                res.rules[i].ctx == ctx && !res.rules[i].tables.iter().any(|(n, _)| *n == m)
            });
            let i = match found {
                Some(i) => i,
                None => {
                    res.rules.push(OutRule {
                        ctx,
                        tables: Vec::new(),
                        from: Vec::new(),
                        srcs: Vec::new(),
                    });
                    res.rules.len() - 1
                }
            };
            let r = &mut res.rules[i];
            r.tables.push((m, t));
            for f in from {
                if !r.from.contains(&f) {
                    r.from.push(f);
                }
            }
            for s in l.srcs {
                if !r.srcs.contains(&s) {
                    r.srcs.push(s);
                }
            }
            prev = Some(i);
        }
    }
    res.modules = order
        .iter()
        .copied()
        .filter(|m| res.tables.iter().any(|(n, _, _)| n == m))
        .collect();
    res
}

/// The conjuncts of `c` (nested `All`s flattened).
pub fn flatten(c: &Cond) -> Vec<Cond> {
    match c {
        Cond::All(cs) => cs.iter().flat_map(flatten).collect(),
        other => vec![other.clone()],
    }
}

fn negate(c: &Cond) -> Cond {
    match c {
        Cond::Not(x) => (**x).clone(),
        other => Cond::invert(other.clone()),
    }
}

/// A context as a flat list of conjuncts, each once, in order.
fn flat_ctx(ctx: &[(Cond, usize)]) -> Vec<Cond> {
    let mut out: Vec<Cond> = Vec::new();
    for (c, _) in ctx {
        for a in flatten(c) {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    out
}

fn conj(ctx: &[(Cond, usize)]) -> Cond {
    if ctx.len() == 1 {
        ctx[0].0.clone()
    } else {
        Cond::All(ctx.iter().map(|(c, _)| c.clone()).collect())
    }
}

#[allow(clippy::too_many_arguments)]
fn gen(
    blocks: &[&Block],
    module: &'static str,
    end: usize,
    ctx: Vec<(Cond, usize)>,
    known: Vec<(&'static str, V, Src)>,
    missing: Vec<&'static str>,
    spec: &dyn ModuleSpec,
    out: &mut Vec<LeafRule>,
    capped: &mut bool,
) {
    let j = if missing.is_empty() {
        None
    } else {
        (0..end).rev().find(|&j| {
            blocks[j].reset
                || blocks[j]
                    .opts
                    .iter()
                    .any(|o| o.module == module && missing.contains(&o.key))
        })
    };
    let emit =
        |out: &mut Vec<LeafRule>, ctx: Vec<(Cond, usize)>, known: &[(&'static str, V, Src)]| {
            let mut opts: Vec<(&'static str, V)> = Vec::new();
            let mut srcs = Vec::new();
            for (k, v, s) in known {
                opts.push((k, v.clone()));
                if !srcs.contains(s) {
                    srcs.push(s.clone());
                }
            }
            out.push(LeafRule {
                ctx,
                leaf: spec.finalize(module, &opts),
                srcs,
            });
        };
    let Some(j) = j else {
        emit(out, ctx, &known);
        return;
    };
    let b = blocks[j];
    let mut known_a = known.clone();
    let mut missing_a = missing.clone();
    for o in b.opts.iter().filter(|o| o.module == module) {
        if let Some(pos) = missing_a.iter().position(|k| *k == o.key) {
            missing_a.remove(pos);
            known_a.push((o.key, o.val.clone(), o.src.clone()));
        }
    }
    if b.reset {
        // Lower rules stop here: what this block does not set comes from the
        // base blocks (the last one setting each key).
        for k in std::mem::take(&mut missing_a) {
            if let Some(o) = blocks
                .iter()
                .filter(|x| x.base)
                .flat_map(|x| x.opts.iter())
                .rfind(|o| o.module == module && o.key == k)
            {
                known_a.push((o.key, o.val.clone(), o.src.clone()));
            }
        }
    }
    // Keep the keys in a stable order (first appearance in the source).
    known_a.sort_by_key(|(k, _, _)| {
        blocks
            .iter()
            .flat_map(|b| b.opts.iter())
            .position(|o| o.module == module && o.key == *k)
    });
    // What the context already says about this block's condition.
    let have: Vec<Cond> = ctx.iter().flat_map(|(c, _)| flatten(c)).collect();
    let need = flatten(&b.cond);
    if need.iter().any(|a| have.contains(&negate(a))) {
        // Cannot match here (an else branch of a test the context holds).
        gen(blocks, module, j, ctx, known, missing, spec, out, capped);
        return;
    }
    if b.cond == Cond::True || need.iter().all(|a| have.contains(a)) {
        // Always matches here (a parent block of one already in the context).
        gen(
            blocks, module, j, ctx, known_a, missing_a, spec, out, capped,
        );
        return;
    }
    let mut ctx_a = ctx.clone();
    ctx_a.push((b.cond.clone(), j));
    if out.len() >= MAX_RULES_PER_MODULE {
        *capped = true;
        emit(out, ctx_a, &known_a);
    } else {
        gen(
            blocks, module, j, ctx_a, known_a, missing_a, spec, out, capped,
        );
    }
    gen(blocks, module, j, ctx, known, missing, spec, out, capped);
}

#[cfg(test)]
mod tests;
