//! `make bench`: runs every section of `provider_bench`, prints the tables and writes them to
//! `BENCHMARKS.md` (see the crate's docs for the knobs).

fn main() -> anyhow::Result<()> {
    let options = provider_bench::Options::from_env()?;
    let report = provider_bench::run(&options)?;
    let charts = provider_bench::charts::draw(&report.charts, &options.out)?;
    let mut report = provider_bench::markdown(&options, &report.tables, "make bench");
    report.push_str(&charts);
    std::fs::write(&options.out, report)?;
    println!("\nwrote {}", options.out.display());
    Ok(())
}
