// One BullMQ worker process with a no-op processor at CONCURRENCY. It connects, prints "ready",
// and starts taking jobs on SIGUSR1 (so the bench times only the processing); SIGTERM closes it.
// usage: node worker.js REDIS_URL CONCURRENCY
"use strict";
const { Worker } = require("bullmq");
const IORedis = require("ioredis");

async function main() {
  const [url, concurrency] = [process.argv[2], Number(process.argv[3])];
  const connection = new IORedis(url, { maxRetriesPerRequest: null });
  const worker = new Worker("bq_bullmq", async () => {}, { connection, concurrency, autorun: false });
  await worker.waitUntilReady();
  process.on("SIGUSR1", () => { worker.run().catch((err) => console.error(err)); });
  process.on("SIGTERM", async () => { await worker.close(); await connection.quit(); process.exit(0); });
  process.stdout.write("ready\n");
}
main().catch((err) => { console.error(err); process.exit(1); });
