//! The command line every example shares: `-h` / `--help`, and a bad command line ending the
//! process with status 2, what is wrong and the usage (the lines of the help before its first
//! blank line: the usage and the `cargo run` line with the features the example needs).

/// Prints `help` on stdout when `args` ask for it (`-h`, `--help`); whether they did.
pub(crate) fn asked(args: &[String], help: &str) -> bool {
    let asked = args.iter().any(|arg| arg == "-h" || arg == "--help");
    if asked {
        println!("{help}");
    }
    asked
}

/// Ends the process on a bad command line: `name: err`, the usage, and where to read more, on
/// stderr; status 2.
pub(crate) fn usage_error(name: &str, help: &str, err: &str) -> ! {
    let usage: Vec<&str> = help.lines().take_while(|line| !line.is_empty()).collect();
    eprintln!(
        "{name}: {err}\n{}\n({name} --help for more)",
        usage.join("\n")
    );
    std::process::exit(2);
}
