//! The per-vhost pipeline: which module instances run for a request, and in what
//! order.
//!
//! # How rules combine
//! Rules are evaluated top-down in file order against the decoded path. A matching
//! rule contributes each module table it sets, unless an earlier matching rule
//! already set that module; a matching rule with `final = true` (the default) stops
//! the evaluation; the vhost's own tables apply last, for modules no matching rule
//! set. A module with a table only in rules runs only when such a rule matches.
//! A list-valued option set in a rule replaces the inherited list: each table is a
//! complete configuration of its module, there is no merging of options.
//!
//! # Order
//! Modules run in the vhost's `modules = [...]` order; modules that appear only in
//! rules follow, in the order of their first appearance. Within a phase, that order
//! is the order of the hooks.
//!
//! # Cost per request
//! Everything here is built once when the configuration is loaded. A request
//! evaluates the rule matches, then picks for each module slot the instance of the
//! first matching rule (a few comparisons, no allocation for up to 16 modules and
//! 8 matching rules). When no rule matches, a precomputed list is used.

use std::sync::Arc;

use smallvec::SmallVec;

use crate::module::{Hooks, Module};
use crate::rule::{Decision, MatchInput, Rule};

/// One module position in the pipeline with every instance configured for it.
pub struct Slot {
    /// Module name.
    pub name: String,
    /// The instance from the vhost's own table (or default options), if the vhost
    /// names the module in `modules`.
    pub vhost_instance: Option<Arc<dyn Module>>,
    /// Instances from rule tables, as (rule index, instance), in rule order.
    pub rule_instances: Vec<(usize, Arc<dyn Module>)>,
    /// The vhost's table as written (`null`: default options), for `tessera -t`.
    pub vhost_table: Option<serde_json::Value>,
    /// The effective table each rule instance was built from, with how it
    /// combined with the vhost's ([`crate::config::inherit`]), as (rule index,
    /// mode, table), in rule order; for `tessera -t`, never read per request.
    pub rule_tables: Vec<(usize, crate::config::inherit::Inherit, serde_json::Value)>,
}

impl Slot {
    /// Whether an instance of it, vhost-wide or in a rule, has `hook`.
    fn has(&self, hook: Hooks) -> bool {
        self.vhost_instance
            .iter()
            .chain(self.rule_instances.iter().map(|(_, m)| m))
            .any(|m| m.hooks().contains(hook))
    }

    /// The instance that runs for a request whose matching rules are
    /// `matched` (indices, in order): the first matching rule's that has a
    /// table for this module, with that rule's index, else the vhost's (with
    /// `None`); `None` when neither exists (the module does not run).
    #[inline]
    pub fn chosen(&self, matched: &[usize]) -> Option<(Option<usize>, &Arc<dyn Module>)> {
        self.rule_instances
            .iter()
            .find(|(ri, _)| matched.contains(ri))
            .map(|(ri, m)| (Some(*ri), m))
            .or(self.vhost_instance.as_ref().map(|m| (None, m)))
    }
}

/// The modules active for one request, in pipeline order, with their hooks
/// (8 inline: a longer pipeline spills to one allocation; more inline would
/// push an asynchronous request's future past glibc's per-thread cache).
pub type Active<'a> = SmallVec<[(Hooks, &'a Arc<dyn Module>); 8]>;

/// A vhost's compiled rules and module slots.
pub struct Pipeline {
    /// Rules, in file order.
    pub rules: Vec<Rule>,
    /// Module slots, in pipeline order.
    pub slots: Vec<Slot>,
    base: Vec<(Hooks, Arc<dyn Module>)>,
    /// Some instance in this pipeline may block ([`Hooks::BLOCKING`]).
    pub may_block: bool,
    /// Some instance answers asynchronously ([`Hooks::ASYNC`]).
    pub may_async: bool,
}

impl Pipeline {
    /// Builds the pipeline and its no-rule-matched list.
    pub fn new(rules: Vec<Rule>, slots: Vec<Slot>) -> Self {
        let base = slots
            .iter()
            .filter_map(|s| s.vhost_instance.as_ref())
            .map(|m| (m.hooks(), m.clone()))
            .collect();
        let any = |hook: Hooks| slots.iter().any(|s| s.has(hook));
        Pipeline {
            may_block: any(Hooks::BLOCKING),
            may_async: any(Hooks::ASYNC),
            rules,
            slots,
            base,
        }
    }

    /// The names of the modules some instance of which (vhost-wide or in a
    /// rule) has `hook`, in pipeline order.
    pub fn names_with(&self, hook: Hooks) -> Vec<&str> {
        self.slots
            .iter()
            .filter(|s| s.has(hook))
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Indices of the rules that match, in order, up to and including the first
    /// matching final rule.
    pub fn matching_rules(&self, input: &MatchInput<'_>) -> SmallVec<[usize; 8]> {
        let mut out = SmallVec::new();
        self.evaluate_rules(input, |i, d| {
            if d.matched {
                out.push(i);
            }
        });
        out
    }

    /// Evaluates the rules top-down, as a request does, and calls `visit`
    /// with each rule evaluated (its index and [`Decision`]), up to and
    /// including the first matching final rule; later rules are not
    /// evaluated. [`Pipeline::matching_rules`] is this, keeping the matches;
    /// `tessera explain` keeps every decision.
    #[inline]
    pub fn evaluate_rules<'p>(
        &'p self,
        input: &MatchInput<'_>,
        mut visit: impl FnMut(usize, Decision<'p>),
    ) {
        for (i, r) in self.rules.iter().enumerate() {
            let d = r.matcher.decide(input);
            let stop = d.matched && r.is_final;
            visit(i, d);
            if stop {
                break;
            }
        }
    }

    /// The module instances that handle a request, in pipeline order.
    pub fn resolve(&self, input: &MatchInput<'_>) -> Active<'_> {
        let matched = self.matching_rules(input);
        if matched.is_empty() {
            return self.resolve_base();
        }
        let mut out = Active::new();
        for slot in &self.slots {
            if let Some((_, m)) = slot.chosen(&matched) {
                out.push((m.hooks(), m));
            }
        }
        out
    }

    /// The modules that run when no rule applies (also used for requests refused
    /// before their path is known, such as a 400 for a bad Host).
    pub fn resolve_base(&self) -> Active<'_> {
        self.base.iter().map(|(h, m)| (*h, m)).collect()
    }

    /// Every instance in this pipeline (for shutdown hooks).
    pub fn instances(&self) -> impl Iterator<Item = &Arc<dyn Module>> {
        self.slots.iter().flat_map(|s| {
            s.vhost_instance
                .iter()
                .chain(s.rule_instances.iter().map(|(_, m)| m))
        })
    }
}
