//! The `tessera` binary: command line, configuration, module registry, and the
//! server. The only place that uses `anyhow`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use tessera_core::module::Hooks;
use tessera_core::{Config, Registry};

/// Tessera: a fast web server with a module pipeline, for sites that run on
/// lighttpd, Cherokee or nginx today.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None)]
struct Cli {
    /// Configuration file [default: conf/server.toml].
    #[arg(short = 'c', long = "config", value_name = "CONFIG")]
    config: Option<PathBuf>,
    /// Check the configuration, print a summary of vhosts, rules and module
    /// pipelines, and exit (like `nginx -t`).
    #[arg(short = 't', long = "test")]
    test: bool,
    /// Write the process id to this file once listening (removed at exit).
    #[arg(long = "pid-file", value_name = "FILE")]
    pid_file: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Translate a lighttpd or Cherokee configuration into server.toml and
    /// print a report. Exit status: 0 clean, 1 translated with warnings
    /// (something approximated or dropped), 2 failed.
    Import(ImportArgs),
    /// Explain how the configuration answers a request, without starting a
    /// server: the vhost and why, each rule with what decided it, the module
    /// tables with their lines, and the file or back end that answers, with
    /// the status and headers it would get.
    Explain(ExplainArgs),
}

#[derive(Debug, clap::Args)]
struct ExplainArgs {
    /// Configuration file (also accepted before `explain`) [default:
    /// conf/server.toml].
    #[arg(short = 'c', long = "config", value_name = "CONFIG")]
    config: Option<PathBuf>,
    /// http://host[:port]/path?query, https://…, or /path (the first
    /// listener's address is then the host).
    url: String,
    /// The method.
    #[arg(
        short = 'X',
        long = "request",
        value_name = "METHOD",
        default_value = "GET"
    )]
    method: String,
    /// A request header field, 'Name: value' (repeatable); Host replaces the
    /// URL's host.
    #[arg(short = 'H', long = "header", value_name = "'Name: value'")]
    headers: Vec<String>,
    /// The client address (the TCP peer; trusted-proxies apply to it).
    #[arg(long = "from", value_name = "IP", default_value = "127.0.0.1")]
    from: std::net::IpAddr,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ImportArgs {
    /// The server whose configuration is read.
    #[arg(value_enum)]
    source: ImportSource,
    /// Its main configuration file (/etc/lighttpd/lighttpd.conf, /etc/cherokee/cherokee.conf).
    file: PathBuf,
    /// Write the TOML here (default: standard output, with the report on standard error).
    /// An existing file is refused (exit 2, left untouched) unless --force is given.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
    /// With -o: replace OUT if it exists.
    #[arg(long, requires = "output")]
    force: bool,
    /// Only print the report; write nothing.
    #[arg(long)]
    check: bool,
    /// The MIME table read instead of running Debian's create-mime.conf.pl.
    #[arg(
        long = "mime-types",
        value_name = "FILE",
        default_value = "/etc/mime.types"
    )]
    mime_types: PathBuf,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ImportSource {
    Lighttpd,
    Cherokee,
}

/// Writes `text` to standard output. A closed pipe (`tessera -t | head -1`)
/// ends the command quietly, as other Unix tools do; `false` then.
fn out(text: &str) -> bool {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    match o.write_all(text.as_bytes()).and_then(|()| o.flush()) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => false,
        Err(e) => {
            eprintln!("tessera: standard output: {e}");
            false
        }
    }
}

/// Writes the imported TOML to `out`. Without `force`, an existing file is an
/// error and is left untouched (the file is created with `O_EXCL`, so a file
/// that appears meanwhile is not replaced either).
fn write_output(out: &std::path::Path, toml: &str, force: bool) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut o = std::fs::OpenOptions::new();
    o.write(true);
    if force {
        o.create(true).truncate(true);
    } else {
        o.create_new(true);
    }
    let mut f = o.open(out).map_err(|e| {
        if e.kind() == std::io::ErrorKind::AlreadyExists {
            anyhow::anyhow!(
                "{}: the file exists and was not changed; write to a new file, or add --force to replace it",
                out.display()
            )
        } else {
            anyhow::anyhow!("{}: {e}", out.display())
        }
    })?;
    f.write_all(toml.as_bytes())
        .map_err(|e| anyhow::anyhow!("{}: {e}", out.display()))
}

/// `tessera import`: 0 clean, 1 with warnings, 2 failed.
fn run_import(args: &ImportArgs) -> ExitCode {
    let source = match args.source {
        ImportSource::Lighttpd => tessera_import::Source::Lighttpd,
        ImportSource::Cherokee => tessera_import::Source::Cherokee,
    };
    let opts = tessera_import::Options {
        mime_types: args.mime_types.clone(),
    };
    let imported = match tessera_import::import(source, &args.file, &opts) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("tessera import: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check {
        out(&imported.report.to_string());
    } else if let Some(out) = &args.output {
        let written = write_output(out, &imported.toml, args.force);
        if let Err(e) = written {
            eprintln!("tessera import: {e:#}");
            return ExitCode::from(2);
        }
        let _ = self::out(&format!("{}wrote {}\n", imported.report, out.display()));
    } else {
        out(&imported.toml);
        eprint!("{}", imported.report);
    }
    ExitCode::from(imported.exit_code())
}

fn registry() -> anyhow::Result<Registry> {
    let mut reg = Registry::new();
    tessera_modules::register_all(&mut reg)?;
    Ok(reg)
}

fn summary(cfg: &Config) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(s, "listen: {}", cfg.server.listen.join(", "));
    if !cfg.server.listen_tls.is_empty() {
        let _ = writeln!(s, "listen-tls: {}", cfg.server.listen_tls.join(", "));
    }
    let _ = writeln!(
        s,
        "http1-engine: {}",
        match cfg.server.http1_engine {
            tessera_core::config::Http1Engine::Tessera => "tessera",
            tessera_core::config::Http1Engine::Actix => "actix",
        }
    );
    for p in &cfg.plugins {
        let _ = writeln!(
            s,
            "plugin \"{}\" {} ({})",
            p.name,
            p.version,
            p.path.display()
        );
    }
    let default = cfg.vhosts.default_vhost().info.index;
    for v in cfg.vhosts.all() {
        let _ = writeln!(
            s,
            "vhost \"{}\"{}: names [{}], document root {}",
            v.label,
            if v.info.index == default {
                " (default)"
            } else {
                ""
            },
            v.info.names.join(", "),
            v.info.document_root.display()
        );
        let base: Vec<&str> = v
            .pipeline
            .slots
            .iter()
            .filter(|sl| sl.vhost_instance.is_some())
            .map(|sl| sl.name.as_str())
            .collect();
        if !v.listen.is_empty() {
            let l: Vec<String> = v.listen.iter().map(ToString::to_string).collect();
            let _ = writeln!(s, "  only on listeners: {}", l.join(", "));
        }
        if v.names_see_port {
            let _ = writeln!(s, "  names see the port");
        }
        let _ = writeln!(s, "  pipeline: {}", base.join(" -> "));
        for (i, r) in v.pipeline.rules.iter().enumerate() {
            let mods: Vec<&str> = v
                .pipeline
                .slots
                .iter()
                .filter(|sl| sl.rule_instances.iter().any(|(ri, _)| *ri == i))
                .map(|sl| sl.name.as_str())
                .collect();
            let _ = writeln!(
                s,
                "  {}: {:?}{} sets [{}]",
                r.label,
                r.matcher,
                if r.is_final { " final" } else { "" },
                mods.join(", ")
            );
            // the effective table of each module the rule sets
            for sl in &v.pipeline.slots {
                for (_, mode, table) in sl.rule_tables.iter().filter(|(ri, _, _)| *ri == i) {
                    let _ = writeln!(
                        s,
                        "    {} (inherit = \"{}\"): {table}",
                        sl.name,
                        mode.as_str()
                    );
                }
            }
        }
    }
    let _ = Hooks::NONE;
    s
}

/// Diagnostics on stderr at `level` (`[server] log-level`), or as `RUST_LOG`
/// says. actix-http logs each malformed request ("stream error: request parse
/// error") at ERROR, so any client could flood the error log; the client has
/// its 400 already and nginx logs these at `info`. That target is therefore off
/// unless `RUST_LOG` is set or the level asks for `debug`/`trace` (its other
/// events, a response body failing mid-stream, static-file logs itself).
fn init_tracing(level: &str) {
    let from_env = tracing_subscriber::EnvFilter::try_from_default_env().ok();
    let quiet_parser = from_env.is_none() && !level.contains("debug") && !level.contains("trace");
    let mut filter = from_env
        .or_else(|| tracing_subscriber::EnvFilter::try_new(level).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("info"));
    if quiet_parser {
        filter = filter.add_directive(
            "actix_http::h1::dispatcher=off"
                .parse()
                .expect("a valid directive"),
        );
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// The default configuration file, relative to the working directory.
const DEFAULT_CONFIG: &str = "conf/server.toml";

/// Options given where they do nothing are refused (clap's usage exit
/// status, 2), not ignored: `import` reads no server.toml, `explain` starts
/// no server, and `-c` is given once.
fn misplaced(cli: &Cli) -> Option<&'static str> {
    match &cli.command {
        Some(Command::Import(_)) if cli.config.is_some() || cli.test || cli.pid_file.is_some() => {
            Some("import reads no server.toml: -c, -t and --pid-file do not apply to it")
        }
        Some(Command::Explain(a)) if a.config.is_some() && cli.config.is_some() => {
            Some("explain: give -c once (before or after `explain`)")
        }
        Some(Command::Explain(_)) if cli.test || cli.pid_file.is_some() => {
            Some("explain starts no server: -t and --pid-file do not apply to it")
        }
        None if cli.test && cli.pid_file.is_some() => {
            Some("-t starts no server: --pid-file does not apply to it")
        }
        _ => None,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(why) = misplaced(&cli) {
        eprintln!("tessera: {why}");
        return ExitCode::from(2);
    }
    if let Some(Command::Import(args)) = &cli.command {
        return run_import(args);
    }
    let config_path = cli
        .config
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let reg = match registry() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tessera: {e:#}");
            return ExitCode::from(1);
        }
    };
    let sys = actix_rt::System::new();
    let result: anyhow::Result<()> = sys.block_on(async {
        let config = match &cli.command {
            Some(Command::Explain(ExplainArgs {
                config: Some(c), ..
            })) => c,
            _ => &config_path,
        };
        let cfg = tessera_core::config::load(config, &reg);
        let cfg = match cfg {
            Ok(c) => c,
            Err(e) => return Err(anyhow::Error::new(e)),
        };
        if let Some(Command::Explain(args)) = &cli.command {
            let cfg = Arc::new(cfg);
            let req = tessera_core::explain::UrlRequest {
                url: args.url.clone(),
                method: args.method.clone(),
                headers: args.headers.clone(),
                from: args.from,
            };
            let e = tessera_core::explain::explain_url(cfg.clone(), &req).await;
            cfg.shutdown();
            let e = e.map_err(|e| anyhow::anyhow!("explain: {e}"))?;
            let text = if args.json {
                serde_json::to_string_pretty(&e)? + "\n"
            } else {
                e.to_string()
            };
            let _ = out(&text);
            return Ok(());
        }
        if cli.test {
            let _ = out(&format!(
                "{}configuration {} is ok\n",
                summary(&cfg),
                config_path.display()
            ));
            cfg.shutdown();
            return Ok(());
        }
        init_tracing(&cfg.server.log_level);
        let rt = tessera_core::supervisor::Runtime::new(cfg, config_path.clone(), reg.clone());
        let opts = tessera_core::server::RunOptions {
            pid_file: cli.pid_file.clone(),
        };
        tessera_core::server::run(Arc::new(rt), opts).await?;
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tessera: {e:#}");
            ExitCode::from(1)
        }
    }
}
