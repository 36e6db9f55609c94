//! The `convoy trace` commands end to end, in-process: generated traces
//! must parse with convoy-link's SeriesTrace (what `convoy emu` and the
//! simulator read), and bad input must fail with a one-line error.

use std::path::Path;

use clap::Parser;

use super::{run, TraceCommand};

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: TraceCommand,
}

fn trace(args: &[&str]) -> anyhow::Result<()> {
    let cli = Cli::try_parse_from(std::iter::once("trace").chain(args.iter().copied()))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    run(cli.cmd)
}

/// A fresh directory, removed when the guard drops (a failing test's too).
fn tempdir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("convoy-trace-test-{name}-"))
        .tempdir()
        .unwrap()
}

const FCD: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<fcd-export>
    <timestep time="0.00">
        <vehicle id="car/0" x="10.00" y="0.00" angle="90" type="car" speed="10" pos="5" lane="a_0" slope="0"/>
    </timestep>
    <timestep time="1.00">
        <vehicle id="car/0" x="20.00" y="0.00" angle="90" type="car" speed="10" pos="15" lane="a_0" slope="0"/>
        <vehicle id="car1" x="900.00" y="0.00" angle="90" type="car" speed="10" pos="15" lane="a_0" slope="0"/>
    </timestep>
    <timestep time="2.00">
        <vehicle id="car1" x="2500.00" y="0.00" angle="90" type="car" speed="10" pos="25" lane="a_0" slope="0"/>
    </timestep>
</fcd-export>
"#;

const POLY: &str = r#"<additional>
    <poly id="b0" type="building" shape="400,-50 600,-50 600,50 400,50 400,-50"/>
    <poly id="w0" type="natural.water" shape="0,500 10,500 10,510 0,510"/>
</additional>
"#;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn from_mobility_writes_traces_the_link_model_accepts() {
    let tmp = tempdir("fm");
    let d = tmp.path();
    let fcd = write(d, "fcd.xml", FCD);
    let poly = write(d, "b.poly.xml", POLY);
    let out = d.join("out");
    let out_s = out.display().to_string();
    trace(&[
        "from-mobility",
        "--fcd",
        &fcd,
        "--rsu",
        "0,0",
        "--enb",
        "100,100",
        "--poly",
        &poly,
        "-o",
        &out_s,
        "--json",
    ])
    .unwrap();
    let mut files = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let p = entry.unwrap().path();
        if p.file_name().unwrap() == "index.csv" {
            continue;
        }
        let t = convoy_link::SeriesTrace::from_file(&p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert!(t.has_rate());
        files += 1;
    }
    assert_eq!(files, 4, "two vehicles × two interfaces");
    // The id with a slash gets a portable file name; its trace starts at 0.
    let t = convoy_link::SeriesTrace::from_file(out.join("car_0.80211p.csv")).unwrap();
    assert_eq!(t.rows().len(), 2);
    assert!(t.rows()[0].up);
    // car1 ends 2.5 km away behind nothing but distance: out of range, down.
    let t = convoy_link::SeriesTrace::from_file(out.join("car1.80211p.csv")).unwrap();
    assert!(!t.rows()[1].up);
    let index = std::fs::read_to_string(out.join("index.csv")).unwrap();
    assert!(index.contains("car1,lte,car1.lte.csv,1,2,2"), "{index}");
}

#[test]
fn buildings_lower_the_delivery_ratio() {
    let tmp = tempdir("shadow");
    let d = tmp.path();
    let fcd = write(
        d,
        "fcd.xml",
        r#"<fcd-export><timestep time="0"><vehicle id="v" x="700" y="0"/></timestep></fcd-export>"#,
    );
    let poly = write(d, "b.poly.xml", POLY);
    let loss = |with_poly: bool| {
        let out = d.join(if with_poly { "a" } else { "b" });
        let out_s = out.display().to_string();
        let mut args = vec![
            "from-mobility",
            "--fcd",
            &fcd,
            "--rsu",
            "300,0",
            "--no-lte",
            "-o",
            &out_s,
        ];
        if with_poly {
            args.extend(["--poly", &poly]);
        }
        trace(&args).unwrap();
        let t = convoy_link::SeriesTrace::from_file(out.join("v.80211p.csv")).unwrap();
        t.rows()[0]
    };
    let clear = loss(false);
    let blocked = loss(true);
    // 2 walls + 200 m inside = 98 dB: the link is gone.
    assert!(clear.up && !blocked.up);
}

#[test]
fn bad_input_fails_with_one_line() {
    let tmp = tempdir("bad");
    let d = tmp.path();
    let out = d.join("o").display().to_string();
    let missing = trace(&[
        "from-mobility",
        "--fcd",
        "/nonexistent/fcd.xml",
        "--rsu",
        "0,0",
        "--enb",
        "0,0",
        "-o",
        &out,
    ]);
    let e = format!("{:#}", missing.unwrap_err());
    assert!(e.contains("cannot read /nonexistent/fcd.xml"), "{e}");
    assert!(!e.contains('\n'));

    let bad = write(
        d,
        "bad.xml",
        "<fcd-export>\n<timestep time=\"0\">\n<vehicle id=\"v\" x=\"1\"/>\n",
    );
    let e = format!(
        "{:#}",
        trace(&[
            "from-mobility",
            "--fcd",
            &bad,
            "--rsu",
            "0,0",
            "--no-lte",
            "-o",
            &out
        ])
        .unwrap_err()
    );
    assert!(e.contains("<vehicle> needs attribute \"y\""), "{e}");

    let net = write(d, "n.xml", "<additional/>");
    let e = format!(
        "{:#}",
        trace(&["obstacle-coefficient", "--net", &net]).unwrap_err()
    );
    assert!(e.contains("expected a SUMO network file"), "{e}");

    let e = format!("{:#}", trace(&["pdr", "--model", "lte"]).unwrap_err());
    assert!(e.contains("invalid value 'lte'"), "{e}");
    let e = format!("{:#}", trace(&["pdr", "--m", "0"]).unwrap_err());
    assert!(e.contains("Nakagami m must be"), "{e}");
    let e = format!(
        "{:#}",
        trace(&["from-mobility", "--fcd", &bad, "-o", &out]).unwrap_err()
    );
    assert!(e.contains("no rsu positions"), "{e}");
}

#[test]
fn lte_trace_from_a_csq_series_parses() {
    let tmp = tempdir("lte");
    let d = tmp.path();
    let csq = write(d, "csq.txt", "# a drive\n31\n25\n19\n0\n12\n");
    let out = d.join("lte.csv");
    let out_s = out.display().to_string();
    trace(&["lte", "--csq-file", &csq, "-o", &out_s]).unwrap();
    let t = convoy_link::SeriesTrace::from_file(&out).unwrap();
    assert_eq!(t.rows().len(), 5);
    assert!(!t.rows()[3].up);
    let bad = write(d, "bad.txt", "31\n40\n");
    let e = format!("{:#}", trace(&["lte", "--csq-file", &bad]).unwrap_err());
    assert!(
        e.contains("bad.txt:2: expected CSQ (0 to 31) or CSQ,CELL"),
        "{e}"
    );
    // A change of CELL is a handover: down for the interruption, then the
    // second's sample; a handover starts a bad spell of the loss model.
    let cells = write(d, "cells.txt", "25,1\n25,1\n25,2\n25,2\n");
    let args = [
        "lte",
        "--csq-file",
        &cells,
        "--handover-interruption-ms",
        "35",
    ];
    let loss = ["--loss", "rate=0,bad=0.2", "-o", &out_s];
    trace(&[&args[..], &loss[..]].concat()).unwrap();
    let rows = convoy_link::SeriesTrace::from_file(&out)
        .unwrap()
        .rows()
        .to_vec();
    assert_eq!(rows.len(), 5);
    assert!(!rows[2].up && rows[3].up);
    assert_eq!(rows[2].start, convoy_link::Dur::from_millis(2000));
    assert_eq!(rows[3].start, convoy_link::Dur::from_millis(2035));
    assert!(
        matches!(rows[3].loss, convoy_link::LossParams::Bernoulli(_))
            && rows[3].loss != rows[0].loss,
        "{rows:?}"
    );
}

#[test]
fn mac_retries_fold_into_the_80211p_trace() {
    let tmp = tempdir("mac");
    let d = tmp.path();
    let fcd = write(
        d,
        "fcd.xml",
        r#"<fcd-export><timestep time="0"><vehicle id="v" x="400" y="0"/></timestep></fcd-export>"#,
    );
    let row = |mac: &str| {
        let out = d.join(mac.replace(':', "_"));
        let out_s = out.display().to_string();
        let args = [
            "from-mobility",
            "--fcd",
            &fcd,
            "--rsu",
            "0,0",
            "--no-lte",
            "--mac",
            mac,
            "-o",
            &out_s,
        ];
        trace(&args).unwrap();
        let t = convoy_link::SeriesTrace::from_file(out.join("v.80211p.csv")).unwrap();
        let r = t.rows()[0];
        let loss = match r.loss {
            convoy_link::LossParams::Bernoulli(p) => p.as_f64(),
            convoy_link::LossParams::None => 0.0,
            other => panic!("the trace's loss is a probability per row, not {other:?}"),
        };
        (r.rate_bps, loss)
    };
    let (raw_rate, raw_loss) = row("none");
    let (rate, loss) = row("80211p:retries=7");
    // 400 m away: a frame in three or so lost on the air.
    assert!(raw_loss > 0.2 && raw_loss < 0.8, "{raw_loss}");
    assert_eq!(raw_rate, 6_000_000);
    assert!(
        (loss - raw_loss.powi(8)).abs() < 1e-6,
        "{loss} vs {raw_loss}^8"
    );
    assert!(rate < raw_rate);
    let e = format!(
        "{:#}",
        trace(&[
            "from-mobility",
            "--fcd",
            &fcd,
            "--rsu",
            "0,0",
            "--no-lte",
            "--mac",
            "80211p:retries=x",
            "-o",
            "/tmp/x"
        ])
        .unwrap_err()
    );
    assert_eq!(
        e,
        "--mac: retries: expected a retry count from 0 to 255, found \"x\""
    );
}

#[test]
fn a_change_of_enodeb_interrupts_the_lte_trace() {
    let tmp = tempdir("handover");
    let d = tmp.path();
    let fcd = write(
        d,
        "fcd.xml",
        r#"<fcd-export>
<timestep time="0"><vehicle id="v" x="100" y="0"/></timestep>
<timestep time="1"><vehicle id="v" x="900" y="0"/></timestep>
</fcd-export>"#,
    );
    let out = d.join("o");
    let out_s = out.display().to_string();
    let args = [
        "from-mobility",
        "--fcd",
        &fcd,
        "--rsu",
        "0,0",
        "--enb",
        "0,0",
        "--enb",
        "1000,0",
        "-o",
        &out_s,
    ];
    trace(&args).unwrap();
    let t = convoy_link::SeriesTrace::from_file(out.join("v.lte.csv")).unwrap();
    let rows = t.rows();
    // 0 s at the first eNodeB; at 1 s down for 50 ms, then the second's.
    assert_eq!(rows.len(), 3);
    assert!(rows[0].up && !rows[1].up && rows[2].up);
    assert_eq!(rows[1].start, convoy_link::Dur::from_millis(1000));
    assert_eq!(rows[2].start, convoy_link::Dur::from_millis(1050));
    let e = format!(
        "{:#}",
        trace(&[args.as_slice(), &["--handover-interruption-ms", "100"]].concat()).unwrap_err()
    );
    assert!(e.contains("must be under 100"), "{e}");
}
