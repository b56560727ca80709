use std::ffi::OsString;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    let sub = args.get(1).and_then(|a| a.to_str()).map(str::to_owned);
    let result = match sub.as_deref() {
        Some("proxy-agent") => dra_e2e::proxy::agent::cli_main(args.split_off(2)),
        Some("cluster") => dra_e2e::cluster::local::cli_main(args.split_off(2)),
        _ => Err(anyhow::anyhow!(
            "the scenario runner is not implemented yet"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
