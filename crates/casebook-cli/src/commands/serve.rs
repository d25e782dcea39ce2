//! `casebook serve` (the team server over the store) and `casebook keys` (its API keys).

use anyhow::Context;
use casebook_store::{KeyMaterial, Scope};
use serde_json::json;

use crate::Outcome;
use crate::args::{KeyScope, KeysCommand, ServeArgs};
use crate::settings::Global;
use crate::stores;

pub fn run(settings: &Global, args: ServeArgs) -> anyhow::Result<Outcome> {
    if args.print_openapi {
        let document =
            casebook_server::openapi_document().to_pretty_json().context("cannot write the OpenAPI document")?;
        crate::write_stdout(&format!("{document}\n"))?;
        return Ok(Outcome::Ok);
    }
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start the async runtime")?;
    let store = stores::open_all(settings, &runtime)?;
    let shown = store.name();
    init_logs(settings);
    let limits = casebook_server::Limits {
        max_body: args.max_body,
        max_json: args.max_json,
        max_concurrent: args.max_concurrent,
        body_idle: std::time::Duration::from_secs(args.body_timeout),
        header_read: std::time::Duration::from_secs(args.header_timeout.max(1)),
        max_connections_per_client: args.max_connections_per_client.max(1),
        capture_quiet: std::time::Duration::from_secs(args.capture_quiet),
        capture_max_wait: std::time::Duration::from_secs(args.capture_max_wait.max(1)),
        max_pending_spans: args.max_pending_spans,
        ..casebook_server::Limits::default()
    };
    // Inside the runtime: the app starts its task that makes cases of received traces.
    let (router, _) = {
        let _inside = runtime.enter();
        casebook_server::app(store.clone(), limits.clone())
    };
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on `{}`", args.listen))?;
        // Listening for the signals starts before the address is printed: a signal sent as
        // soon as the server says where it is stops it gracefully, instead of killing it.
        let stop = stop_signal()?;
        let address = listener.local_addr().context("cannot read the address listened on")?;
        let url = format!("http://{address}");
        crate::write_stdout(&if settings.json {
            format!("{}\n", json!({"listening": url, "store": shown}))
        } else {
            format!("{url}\n")
        })?;
        tracing::info!(%url, store = %shown, "serving");
        casebook_server::serve(listener, router, &limits, stop).await.context("the server failed")?;
        tracing::info!("stopped: every request in flight was answered");
        store.close().await;
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(Outcome::Ok)
}

/// Listens for SIGINT and SIGTERM from now on; the future resolves on either. Called inside
/// the runtime.
fn stop_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut interrupt = signal(SignalKind::interrupt()).context("cannot listen for SIGINT")?;
        let mut term = signal(SignalKind::terminate()).context("cannot listen for SIGTERM")?;
        Ok(async move {
            tokio::select! {
                _ = interrupt.recv() => {}
                _ = term.recv() => {}
            }
        })
    }
    #[cfg(not(unix))]
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}

/// Request logs on stderr: JSON lines with `--format json`, else text (coloured on a terminal
/// unless `NO_COLOR`). `--quiet` keeps only warnings and errors. A server whose stderr was
/// closed keeps serving, without logs (tracing would otherwise report, and so panic, on every
/// request).
fn init_logs(settings: &Global) {
    let level = if settings.quiet { tracing::Level::WARN } else { tracing::Level::INFO };
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(level)
        .with_target(false)
        .log_internal_errors(false);
    let _ = if settings.json {
        builder.json().with_current_span(true).try_init()
    } else {
        builder.with_ansi(settings.color_stderr).try_init()
    };
}

pub fn keys(settings: &Global, command: KeysCommand) -> anyhow::Result<Outcome> {
    let runtime = stores::runtime()?;
    let store = stores::open_all(settings, &runtime)?;
    let text = match command {
        KeysCommand::Create(args) => {
            let Some(project) = &settings.project else {
                anyhow::bail!(
                    "name the project the key opens: `casebook keys create --project NAME --scope read|write`"
                );
            };
            let scope = match args.scope {
                KeyScope::Read => Scope::Read,
                KeyScope::Write => Scope::Write,
                KeyScope::Admin => Scope::Admin,
            };
            let mut material = KeyMaterial { id: [0; 6], secret: [0; 32], store_secret: [0; 32] };
            for bytes in [&mut material.id[..], &mut material.secret[..], &mut material.store_secret[..]] {
                getrandom::fill(bytes).map_err(|e| anyhow::anyhow!("cannot read random bytes for the key: {e}"))?;
            }
            let made = runtime.block_on(store.create_key(
                project,
                scope,
                &args.label,
                &settings.author,
                &settings.time,
                &material,
            ))?;
            if !settings.quiet && !settings.json {
                stderr!(
                    "made key `{}` for project `{}` ({}): copy it now, it is not shown again",
                    made.key.id,
                    made.key.project,
                    scope.as_str()
                );
            }
            if settings.json {
                format!("{}\n", json!({"key": made.key, "token": made.token}))
            } else {
                format!("{}\n", made.token)
            }
        }
        KeysCommand::List => {
            let keys = runtime.block_on(store.keys(settings.project.as_deref()))?;
            if settings.json {
                keys.iter().map(|k| Ok(serde_json::to_string(k)? + "\n")).collect::<serde_json::Result<String>>()?
            } else if keys.is_empty() {
                "no API keys (`casebook keys create --project NAME --scope read|write` makes one)\n".to_owned()
            } else {
                let mut out = String::new();
                for k in &keys {
                    let state = k.revoked.as_ref().map_or("active".to_owned(), |t| format!("revoked {t}"));
                    out.push_str(&format!(
                        "{}  {:<20} {:<5}  {}  {}  {}\n",
                        k.id,
                        k.project,
                        k.scope.as_str(),
                        k.created,
                        state,
                        k.label
                    ));
                }
                out
            }
        }
        KeysCommand::Revoke(args) => {
            let key = runtime.block_on(store.revoke_key(&args.id, &settings.time))?;
            if settings.json {
                format!("{}\n", serde_json::to_string(&key)?)
            } else {
                format!("revoked key `{}` of project `{}`\n", key.id, key.project)
            }
        }
    };
    runtime.block_on(store.close());
    crate::write_stdout(&text)?;
    Ok(Outcome::Ok)
}
