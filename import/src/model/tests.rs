use super::*;

struct Spec;
impl ModuleSpec for Spec {
    fn finalize(&self, module: &str, opts: &[(&'static str, V)]) -> Leaf {
        if module == "dir-listing" {
            return match opts.iter().find(|(k, _)| *k == "enabled") {
                Some((_, V::Bool(true))) => Leaf::Table(vec![]),
                _ => Leaf::Off,
            };
        }
        Leaf::Table(
            opts.iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }
    fn off_table(&self, module: &str) -> Option<Vec<(String, V)>> {
        (module == "headers").then(Vec::new)
    }
}

fn url(p: &str) -> Cond {
    Cond::Match(V::tab1("path-prefix", V::s(p)))
}

fn block(cond: Cond, opts: &[(&'static str, &'static str, V)]) -> Block {
    Block {
        cond,
        opts: opts
            .iter()
            .map(|(m, k, v)| Opt {
                module: m,
                key: k,
                val: v.clone(),
                src: Src::new("t", 1),
            })
            .collect(),
        reset: false,
        base: false,
        label: String::new(),
    }
}

fn resolve_(blocks: &[Block]) -> Resolved {
    resolve(
        blocks,
        &["headers", "expires", "dir-listing"],
        &Spec,
        "v",
        &mut Report::default(),
    )
}

#[test]
fn last_block_comes_first() {
    // global url=G; /a/ sets url=A; later /a/b/ sets url=B: /a/b/x gets B.
    let r = resolve_(&[
        block(Cond::True, &[("expires", "url", V::s("G"))]),
        block(url("/a/"), &[("expires", "url", V::s("A"))]),
        block(url("/a/b/"), &[("expires", "url", V::s("B"))]),
    ]);
    assert_eq!(r.rules.len(), 2);
    assert_eq!(r.rules[0].ctx, vec![url("/a/b/")]);
    assert_eq!(r.rules[0].tables[0].1, vec![("url".into(), V::s("B"))]);
    assert_eq!(r.rules[1].ctx, vec![url("/a/")]);
    assert_eq!(r.tables[0].1, vec![("url".into(), V::s("G"))]);
}

#[test]
fn options_of_one_module_from_different_blocks_combine() {
    // /a/ sets url, /b sets mime-types: a request matching both gets both.
    let r = resolve_(&[
        block(url("/a/"), &[("expires", "url", V::s("A"))]),
        block(url("/a/b"), &[("expires", "mime-types", V::s("M"))]),
    ]);
    let ctxs: Vec<&Vec<Cond>> = r.rules.iter().map(|r| &r.ctx).collect();
    assert_eq!(
        ctxs,
        vec![
            &vec![url("/a/b"), url("/a/")],
            &vec![url("/a/b")],
            &vec![url("/a/")]
        ]
    );
    assert_eq!(r.rules[0].tables[0].1.len(), 2);
    // Neither block: the (empty) vhost-level table.
    assert!(r.tables[0].1.is_empty());
}

#[test]
fn off_without_a_table_is_excluded_from_later_rules() {
    let r = resolve_(&[
        block(Cond::True, &[("dir-listing", "enabled", V::Bool(true))]),
        block(
            url("/private/"),
            &[("dir-listing", "enabled", V::Bool(false))],
        ),
    ]);
    assert!(r.tables.is_empty());
    assert_eq!(r.rules.len(), 1);
    assert_eq!(r.rules[0].ctx, vec![Cond::invert(url("/private/"))]);
}

#[test]
fn reset_blocks_stop_lower_ones() {
    // Cherokee: priority 2 (final) sets headers only; priority 1 sets
    // expires. A request matching both gets no expires.
    let mut hi = block(url("/x/"), &[("headers", "set", V::s("H"))]);
    hi.reset = true;
    let mut base = block(Cond::True, &[("headers", "add", V::s("B"))]);
    base.base = true;
    let r = resolve_(&[
        base,
        block(Cond::True, &[("expires", "url", V::s("E"))]),
        hi,
    ]);
    let exp: Vec<&OutRule> = r
        .rules
        .iter()
        .filter(|r| r.tables.iter().any(|(m, _)| *m == "expires"))
        .collect();
    assert_eq!(exp.len(), 1);
    assert_eq!(exp[0].ctx, vec![url("/x/")]);
    assert!(exp[0]
        .tables
        .iter()
        .any(|(m, t)| *m == "expires" && t.is_empty()));
    // A base (vhost-level) setting survives the reset.
    let hdr = r.rules.iter().find(|r| r.ctx == vec![url("/x/")]).unwrap();
    let (_, t) = hdr.tables.iter().find(|(m, _)| *m == "headers").unwrap();
    assert_eq!(
        t,
        &vec![("add".to_owned(), V::s("B")), ("set".to_owned(), V::s("H"))]
    );
}

#[test]
fn host_tests_simplify() {
    let c = Cond::All(vec![
        Cond::Host(HostTest::Exact("a.example".into())),
        url("/x/"),
    ]);
    let yes = c.simplify(&|t| Some(t.eval("a.example")));
    assert_eq!(yes, url("/x/"));
    let no = c.simplify(&|t| Some(t.eval("b.example")));
    assert_eq!(no, Cond::False);
    assert_eq!(
        HostTest::Suffix(".example.org".into()).server_name(),
        "*.example.org"
    );
    assert_eq!(
        HostTest::Suffix("example.org".into()).server_name(),
        "~example\\.org$"
    );
}
