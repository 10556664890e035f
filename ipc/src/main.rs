//! `ipc` is the agent container's only way to reach the Carapace core:
//!
//!     ipc <topic> <json-object>
//!     ipc <topic> -            (arguments JSON on stdin)
//!
//! It sends {topic, correlation, arguments} over ZeroMQ and prints the result
//! to stdout (exit 0), or the error to stderr as one line of JSON (exit 1;
//! exit 2 for bad usage). It never prints a panic message or a backtrace.
//!
//! Written in Rust (std plus serde_json) rather than Go because start-up is a
//! large part of every call: in a bash loop, `ipc` stopping at a usage error
//! takes 0.83 ms here (as long as /bin/true), the Go version took 1.7-1.9 ms.

mod args;
mod client;
mod json;
mod uuid;
mod zmtp;

use std::ffi::OsString;
use std::io::Write;

pub const EXIT_OK: i32 = 0;
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// What we print on stderr, shaped like the core's own errors so the agent
/// handles both the same way.
#[derive(Debug)]
pub struct Failure {
    pub code: &'static str,
    pub message: String,
    pub retriable: bool,
    pub exit: i32,
}

impl Failure {
    pub fn new(code: &'static str, message: impl Into<String>, retriable: bool, exit: i32) -> Failure {
        Failure { code, message: message.into(), retriable, exit }
    }

    fn internal(message: &str) -> Failure {
        Failure::new("IPC_INTERNAL", message, false, EXIT_ERROR)
    }
}

/// The core's answer: the compacted JSON of `result` or of `error`.
pub enum Outcome {
    Result(Vec<u8>),
    Error(Vec<u8>),
}

fn main() {
    // panic = "abort" already rules out unwinding and backtraces; this hook
    // replaces the panic message with the structured error every other
    // failure uses, and exits before the abort.
    std::panic::set_hook(Box::new(|_| {
        std::process::exit(report(&Failure::internal("internal error in ipc")));
    }));
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    std::process::exit(run(&args));
}

fn run(args: &[OsString]) -> i32 {
    match call_core(args) {
        Err(f) => report(&f),
        Ok(Outcome::Error(error)) => {
            write_line(&mut std::io::stderr(), error);
            EXIT_ERROR
        }
        Ok(Outcome::Result(result)) => match write_line(&mut std::io::stdout(), result) {
            true => EXIT_OK,
            false => EXIT_ERROR,
        },
    }
}

/// Checks the input, in the order the Go version did (so the same mistake
/// gets the same error), then asks the core.
fn call_core(args: &[OsString]) -> Result<Outcome, Failure> {
    let (topic, arguments) = match args {
        [topic, arguments] => (topic, arguments),
        _ => return Err(args::usage("usage: ipc <topic> <json-object|->")),
    };
    let topic = args::check_topic(topic)?;
    let path = args::socket_path()?;
    let timeout = args::timeout()?;
    let arguments = args::read_arguments(arguments)?;
    let correlation =
        uuid::new_v4().map_err(|_| Failure::internal("cannot generate a correlation id"))?;
    let request = args::build_request(topic, &correlation, &arguments)?;
    client::call(&path, &request, &correlation, timeout)
}

/// Prints a failure as one line of JSON and returns its exit code.
fn report(f: &Failure) -> i32 {
    let line = format!(
        "{{\"code\":{},\"message\":{},\"retriable\":{}}}\n",
        json::string(f.code),
        json::string(&f.message),
        f.retriable
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    f.exit
}

/// Prints compacted JSON and its newline in one write.
fn write_line(w: &mut impl Write, mut line: Vec<u8>) -> bool {
    line.push(b'\n');
    w.write_all(&line).and_then(|_| w.flush()).is_ok()
}
