//! `casebook purge`: erase cases from every version of a dataset (see `casebook_store`'s
//! `purge` module), on the local store or through `CASEBOOK_URL` with an `admin` key.

use std::io::{BufRead, IsTerminal, Write};

use casebook_server::api::{PurgeBody, PurgeReport};
use casebook_store::PurgeRequest;

use crate::Outcome;
use crate::args::PurgeArgs;
use crate::settings::Global;
use crate::stores;

pub fn purge(settings: &Global, args: PurgeArgs) -> anyhow::Result<Outcome> {
    if args.reason.trim().is_empty() {
        anyhow::bail!("`--reason` is empty: say why the cases are purged (it is logged with the purge)");
    }
    let select = crate::settings::selection(&args.select)?;
    let select = select.filter.is_some().then_some(select);
    if args.ids.is_empty() && select.is_none() {
        anyhow::bail!("name the cases to purge: case ids, `--where EXPR`, `--tag LABEL`, or several");
    }
    let runtime = stores::runtime()?;
    let report = if settings.on_server() {
        use crate::remote::Remote;
        let remote = runtime.block_on(Remote::connect())?;
        let chosen = match &select {
            Some(select) => format!(
                "{} and the cases `{}` selects",
                listed(&args.ids),
                select.filter.as_ref().map_or_else(String::new, ToString::to_string)
            ),
            None => listed(&args.ids),
        };
        confirm(&args, &format!("{chosen} of `{}` on {}", args.name, remote.url))?;
        let body = PurgeBody {
            ids: args.ids.clone(),
            filter: select.as_ref().and_then(|s| s.filter.as_ref().map(ToString::to_string)),
            limit: select.as_ref().and_then(|s| s.limit),
            reason: args.reason.clone(),
            rewrite: Some(!args.no_vacuum),
        };
        let request = remote
            .request(reqwest::Method::POST, &remote.dataset_path(&args.name, "/purge"))
            .header("x-casebook-author", &settings.author)
            .json(&body);
        runtime.block_on(remote.json::<PurgeReport>(request))?
    } else {
        // The embedded store's owner may purge (whoever can write its file could rewrite it anyway).
        let store = stores::open_write(settings, &runtime)?;
        let done = (|| {
            let cases =
                runtime.block_on(casebook_store::purge_choice(&store, &args.name, &args.ids, select.as_ref()))?;
            confirm(&args, &format!("{} of `{}`", listed(&cases), args.name))?;
            let request = PurgeRequest {
                dataset: args.name.clone(),
                cases,
                author: settings.author.clone(),
                time: settings.time.clone(),
                reason: args.reason.clone(),
                full: !args.no_vacuum,
            };
            Ok::<_, anyhow::Error>(runtime.block_on(store.purge(&request))?)
        })();
        runtime.block_on(store.close());
        PurgeReport::from(done?)
    };
    say(settings, &args.name, &report)?;
    Ok(Outcome::Ok)
}

/// `3 cases (`a`, `b`, `c`)`.
fn listed(ids: &[String]) -> String {
    let shown: Vec<String> = ids.iter().take(10).map(|c| format!("`{c}`")).collect();
    let more = if ids.len() > 10 { format!(" and {} more", ids.len() - 10) } else { String::new() };
    format!("{} ({}{more})", crate::plural(ids.len() as u64, "case"), shown.join(", "))
}

/// Asks on the terminal before purging, unless `--yes`; without a terminal, refuses.
fn confirm(args: &PurgeArgs, what: &str) -> anyhow::Result<()> {
    if args.yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        anyhow::bail!("a purge cannot be undone and there is no terminal to ask: add `--yes` to purge {what}");
    }
    let mut err = std::io::stderr();
    write!(err, "purge {what} from every version? This cannot be undone. Type `yes` to go on: ")?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if answer.trim() != "yes" {
        anyhow::bail!("nothing was purged (the answer was not `yes`)");
    }
    Ok(())
}

fn say(settings: &Global, name: &str, report: &PurgeReport) -> anyhow::Result<()> {
    if settings.json {
        crate::write_stdout(&format!("{}\n", serde_json::to_string(report)?))?;
        return Ok(());
    }
    let p = &report.purge;
    crate::write_stdout(&format!(
        "purged {} from {} of {name} ({} of runs, {} deleted; purge #{}, logged)\n",
        listed(&p.cases),
        crate::plural(p.versions, "version"),
        crate::plural(p.results, "result"),
        crate::plural(report.bodies, "stored body"),
        p.id,
    ))?;
    if !settings.quiet {
        if !report.kept_shared.is_empty() {
            stderr!(
                "warning: another dataset holds the same content as {}: that content stays until it is purged there too",
                listed(&report.kept_shared)
            );
        }
        if !report.erased {
            stderr!(
                "warning: the deleted text may stay in the store's free space until it is reused (SQLite: the log could not be checkpointed while others read; PostgreSQL: `--no-vacuum`)"
            );
        }
    }
    Ok(())
}
