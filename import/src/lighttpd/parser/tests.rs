use super::*;

fn opts() -> ParseOptions {
    ParseOptions {
        mime_types: PathBuf::from("/nonexistent/mime.types"),
    }
}

fn parse(s: &str) -> Parsed {
    parse_text("t.conf", s, Path::new("/nonexistent"), &opts()).unwrap()
}

fn get<'a>(p: &'a Parsed, ctx: usize, key: &str) -> &'a Val {
    &p.contexts[ctx].get(key).unwrap().val
}

#[test]
fn variables_and_concatenation() {
    let p = parse(
        "var.root = \"/srv\"\nname = \"www\"\nserver.document-root = root + \"/\" + name + \"/\" + 80\nx = 1 + 2\n",
    );
    assert_eq!(
        get(&p, 0, "server.document-root"),
        &Val::Str("/srv/www/80".into())
    );
    assert_eq!(get(&p, 0, "var.x"), &Val::Int(3));
    // An undefined variable drops the statement with a note.
    let p = parse("a.b = nope + \"x\"\nc.d = 1\n");
    assert!(p.contexts[0].get("a.b").is_none());
    assert_eq!(get(&p, 0, "c.d"), &Val::Int(1));
    assert!(p
        .notes
        .iter()
        .any(|n| n.outcome == Outcome::Dropped && n.message.contains("nope")));
    // In a condition it is an error naming file and line.
    let e = parse_text(
        "t.conf",
        "$HTTP[\"host\"] == nope { }\n",
        Path::new("/"),
        &opts(),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "t.conf:1: nope: undefined variable");
}

#[test]
fn env_variables() {
    std::env::set_var("TESSERA_IMPORT_TEST_ENV", "/from/env");
    let p = parse("server.document-root = env.TESSERA_IMPORT_TEST_ENV + \"/x\"\n");
    assert_eq!(
        get(&p, 0, "server.document-root"),
        &Val::Str("/from/env/x".into())
    );
    // An undefined one is fatal, as in lighttpd, naming file and line.
    let e = parse_text(
        "t.conf",
        "a.c = 1\nserver.document-root = env.TESSERA_NO_SUCH_VAR_X + \"/x\"\n",
        Path::new("/"),
        &opts(),
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("t.conf:2: env.TESSERA_NO_SUCH_VAR_X: the environment variable"),
        "{e}"
    );
}

#[test]
fn append_in_nested_blocks_copies_the_enclosing_value() {
    let p = parse(
        r#"
setenv.add-response-header = ( "X-Global" => "1" )
$HTTP["host"] == "a.example" {
  setenv.add-response-header += ( "X-Site" => "a" )
  $HTTP["url"] =^ "/img/" {
setenv.add-response-header += ( "X-Img" => "1" )
  }
}
setenv.add-response-header += ( "X-Late" => "1" )
index-file.names += ( "index.html" )
"#,
    );
    let pairs = |c| get(&p, c, "setenv.add-response-header").as_pairs();
    assert_eq!(
        pairs(0),
        vec![
            ("X-Global".into(), "1".into()),
            ("X-Late".into(), "1".into())
        ]
    );
    // The block copied the global value as it stood when it was parsed.
    assert_eq!(
        pairs(1),
        vec![
            ("X-Global".into(), "1".into()),
            ("X-Site".into(), "a".into())
        ]
    );
    assert_eq!(pairs(2).len(), 3);
    assert_eq!(get(&p, 0, "index-file.names").as_list(), vec!["index.html"]);
    assert_eq!(p.contexts[2].parent, Some(1));
}

#[test]
fn duplicate_assignment_and_force() {
    assert!(parse_text("t", "a.b = 1\na.b = 2\n", Path::new("/"), &opts()).is_err());
    let p = parse("a.b = 1\na.b := 2\n");
    assert_eq!(get(&p, 0, "a.b"), &Val::Int(2));
    assert!(parse_text(
        "t",
        "a.b = (\"x\" => 1, \"X\" => 2)\n",
        Path::new("/"),
        &opts()
    )
    .is_err());
}

#[test]
fn else_chains() {
    let p = parse(
        r#"
$HTTP["url"] =^ "/a/" { a.x = 1 }
else $HTTP["url"] =~ "^/b/(.*)" { a.x = 2 }
elseif $HTTP["url"] =$ ".c" { a.x = 3 }
else { a.x = 4 }
$HTTP["host"] == "h" { a.x = 5 } else if $HTTP["host"] != "i" { a.x = 6 }
"#,
    );
    assert_eq!(p.contexts.len(), 7);
    assert_eq!(p.contexts[2].negs.len(), 1);
    assert_eq!(p.contexts[2].cond.as_ref().unwrap().op, CondOp::Re);
    assert_eq!(p.contexts[2].cond.as_ref().unwrap().value, "^/b/(.*)");
    assert_eq!(p.contexts[3].negs.len(), 2);
    assert!(p.contexts[4].cond.is_none());
    assert_eq!(p.contexts[4].negs.len(), 3);
    assert_eq!(p.contexts[6].negs[0].value, "h");
    assert_eq!(p.contexts[6].cond.as_ref().unwrap().op, CondOp::Ne);
    assert!(parse_text(
        "t",
        "$HTTP[\"url\"] == \"/\" { }\nelse { }\nelse { }\n",
        Path::new("/"),
        &opts()
    )
    .is_err());
    assert!(parse_text("t", "else { }\n", Path::new("/"), &opts()).is_err());
}

#[test]
fn includes_are_relative_to_the_main_file_and_globbed() {
    let dir = std::env::temp_dir().join(format!("tessera-import-inc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("conf.d/sub")).unwrap();
    std::fs::write(dir.join("conf.d/20-b.conf"), "b.x = base + \"/b\"\n").unwrap();
    std::fs::write(
        dir.join("conf.d/10-a.conf"),
        "a.x = 1\ninclude \"conf.d/sub/x.conf\"\n",
    )
    .unwrap();
    std::fs::write(dir.join("conf.d/sub/x.conf"), "c.x = \"inner\"\n").unwrap();
    std::fs::write(
        dir.join("main.conf"),
        "var.base = \"/srv\"\ninclude \"conf.d/*.conf\"\ninclude \"none/*.conf\"\n$HTTP[\"host\"] == \"h\" {\n include \"conf.d/2{0,9}-b.conf\"\n}\n",
    )
    .unwrap();
    let p = parse_file(&dir.join("main.conf"), &opts()).unwrap();
    assert_eq!(get(&p, 0, "a.x"), &Val::Int(1));
    assert_eq!(get(&p, 0, "c.x"), &Val::Str("inner".into()));
    assert_eq!(get(&p, 0, "b.x"), &Val::Str("/srv/b".into()));
    // The include inside the block puts its options in the block.
    assert_eq!(get(&p, 1, "b.x"), &Val::Str("/srv/b".into()));
    let order: Vec<&str> = p
        .files
        .iter()
        .map(|f| f.rsplit('/').next().unwrap())
        .collect();
    assert_eq!(
        order,
        ["main.conf", "10-a.conf", "x.conf", "20-b.conf", "20-b.conf"]
    );
    // A missing literal include is fatal, as in lighttpd, naming the
    // including file and line.
    std::fs::write(dir.join("m2.conf"), "a.x = 1\ninclude \"missing.conf\"\n").unwrap();
    let e = parse_file(&dir.join("m2.conf"), &opts()).unwrap_err();
    let m2 = dir.join("m2.conf").display().to_string();
    assert!(
        e.to_string()
            .starts_with(&format!("{m2}:2: include \"missing.conf\": ")),
        "{e}"
    );
    // An include loop is an error, not a stack overflow.
    std::fs::write(dir.join("loop.conf"), "include \"loop.conf\"\n").unwrap();
    assert!(matches!(
        parse_file(&dir.join("loop.conf"), &opts()),
        Err(ImportError::IncludeDepth { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn include_shell_helpers() {
    let p = parse(
        "server.port = 8080\ninclude_shell \"/usr/share/lighttpd/use-ipv6.pl \" + server.port\ninclude_shell \"cat external.conf\"\n",
    );
    let c = p.contexts[1].cond.as_ref().unwrap();
    assert_eq!((c.key.as_str(), c.value.as_str()), ("socket", "[::]:8080"));
    assert!(p
        .notes
        .iter()
        .any(|n| n.outcome == Outcome::Dropped && n.what.contains("cat external.conf")));
}
