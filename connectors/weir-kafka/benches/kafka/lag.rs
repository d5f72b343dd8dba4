//! Part 3 of the Kafka bench: the lag of an unbounded reader under a burst.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::producer::{BaseRecord, Producer};
use weir_testkit::unique_name;

use super::{
    BURST, Bench, BenchResult, bid_json, flush, open_readers, plain_producer, prepare_source, send,
    source_options,
};

/// One sample of the burst.
struct LagSample {
    at: Duration,
    acked: u64,
    read: u64,
    reported: Option<u64>,
}

/// Part 3: the lag of an unbounded reader under a burst of [`BURST`] records.
pub(crate) async fn burst(bench: &Bench) -> BenchResult<()> {
    let topic = unique_name("kbench-burst");
    bench.broker.create_topic(&topic, 1)?;
    let source = prepare_source(&source_options(&bench.servers, &topic, false)).await?;
    let mut readers = open_readers(source.as_ref()).await?;
    let mut reader = readers.pop().ok_or("no split")?;
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let reading = tokio::spawn(async move {
        while let Some(batch) = reader.next_batch().await? {
            if events_tx
                .send((Instant::now(), batch.data.num_rows() as u64, batch.backlog))
                .is_err()
            {
                break;
            }
        }
        BenchResult::Ok(())
    });
    // Lets the consumer join and its statistics (the partition's end) arrive.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let producer = Arc::new(plain_producer(&bench.servers)?);
    let start = Instant::now();
    let producing = {
        let (producer, topic) = (producer.clone(), topic.clone());
        tokio::task::spawn_blocking(move || {
            for i in 0..BURST {
                let value = bid_json(i);
                send(&producer, BaseRecord::to(&topic).payload(value.as_slice()))?;
            }
            let handed = start.elapsed();
            flush(&producer)?;
            BenchResult::Ok((handed, start.elapsed()))
        })
    };
    let mut samples = Vec::new();
    let (mut read, mut reported, mut drained) = (0u64, None, None);
    let (mut peak_reported, mut peak_true) = (0u64, 0u64);
    let mut last_nonzero_report: Option<Duration> = None;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    while start.elapsed() < Duration::from_secs(60) {
        tick.tick().await;
        while let Ok((at, rows, backlog)) = events.try_recv() {
            read += rows;
            reported = backlog;
            let backlog_now = backlog.unwrap_or(0);
            peak_reported = peak_reported.max(backlog_now);
            if backlog_now > 0 {
                last_nonzero_report = Some(at.duration_since(start));
            }
            if read >= BURST && drained.is_none() {
                drained = Some(at.duration_since(start));
            }
        }
        let acked = producer.context().delivered.load(Ordering::Relaxed);
        peak_true = peak_true.max(acked.saturating_sub(read));
        samples.push(LagSample {
            at: start.elapsed(),
            acked,
            read,
            reported,
        });
        if drained.is_some() {
            break;
        }
    }
    let (handed, acked_all) = producing.await??;
    reading.abort();
    let drained = drained.ok_or("the reader did not read the whole burst within 60 s")?;
    println!();
    println!("## 3. consumer lag under a burst of {BURST} records (one partition)");
    println!(
        "{:>8} {:>10} {:>10} {:>10} {:>12}",
        "t (ms)", "acked", "read", "true lag", "reported"
    );
    let every = (samples.len() / 16).max(1);
    for (i, s) in samples.iter().enumerate() {
        if i % every == 0 || i + 1 == samples.len() {
            let shown = s
                .reported
                .map_or_else(|| "None".to_owned(), |b| b.to_string());
            println!(
                "{:>8} {:>10} {:>10} {:>10} {:>12}",
                s.at.as_millis(),
                s.acked,
                s.read,
                s.acked.saturating_sub(s.read),
                shown
            );
        }
    }
    println!(
        "producer: all handed over after {} ms, all acknowledged after {} ms",
        handed.as_millis(),
        acked_all.as_millis()
    );
    println!("peak true lag (acknowledged - read, 50 ms samples): {peak_true}");
    println!("peak reported backlog (SplitBatch::backlog): {peak_reported}");
    println!(
        "last batch with a reported backlog > 0: {} ms; backlog reported with the last batch: {:?}",
        last_nonzero_report.map_or(0, |d| d.as_millis()),
        reported
    );
    println!(
        "time to drain (burst start -> every record read): {} ms",
        drained.as_millis()
    );
    Ok(())
}
