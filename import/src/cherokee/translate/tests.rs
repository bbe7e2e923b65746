use crate::cherokee::test_util::imp;

#[test]
fn vserver_matching() {
    let (t, r) = imp(concat!(
        "vserver!1!nick = default\nvserver!1!document_root = /srv/a\n",
        "vserver!1!rule!1!match = default\nvserver!1!rule!1!handler = file\n",
        "vserver!5!nick = www.example.org\nvserver!5!document_root = /srv/b\n",
        "vserver!5!match = wildcard\nvserver!5!match!domain!1 = *.example.org\n",
        "vserver!5!match!domain!2 = example.*\n",
        "vserver!5!rule!1!match = default\nvserver!5!rule!1!handler = file\n",
    ));
    assert!(
        t.contains(r#"server-names = ["*.example.org", '~^example\..*$', "www.example.org"]"#),
        "{t}"
    );
    assert!(
        t.contains("default = true\ndocument-root = \"/srv/a\""),
        "{t}"
    );
    assert!(r.summary().contains("translated"));
}
