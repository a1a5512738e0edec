// Pre-fill: N no-op jobs in queue "bq_bullmq" (addBulk in chunks), then exit.
// usage: node fill.js REDIS_URL N
"use strict";
const { Queue } = require("bullmq");
const IORedis = require("ioredis");

async function main() {
  const [url, n] = [process.argv[2], Number(process.argv[3])];
  const connection = new IORedis(url, { maxRetriesPerRequest: null });
  const queue = new Queue("bq_bullmq", { connection });
  const opts = { removeOnComplete: true, removeOnFail: true };
  for (let start = 0; start < n; start += 1000) {
    const jobs = [];
    for (let i = start; i < Math.min(n, start + 1000); i++) jobs.push({ name: "noop", data: { i }, opts });
    await queue.addBulk(jobs);
  }
  await queue.close();
  await connection.quit();
}
main().catch((err) => { console.error(err); process.exit(1); });
