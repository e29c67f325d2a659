#!/usr/bin/env node
/*
 * kafkajs 2.2.4 (Node.js, an independent Kafka client family with its own protocol code) against
 * spool's Kafka port, driven by tests/tests/kafka_kafkajs.rs (issue 17, item 5).
 *
 * `group`: creates a topic, produces keyed gzip-compressed messages with acks=-1 from an
 * idempotent producer (one message per send, so each acknowledgement's baseOffset is that
 * message's offset), consumes them with a group of two members that share the partitions (each
 * commits after each batch, awaited before the next), stops both, produces more, and has a fresh
 * member of the same group read from the committed offsets.
 *
 * `times`: creates a one-partition topic, produces records stamped T0 + 1000 * i and asks
 * admin.fetchTopicOffsetsByTimestamp for T0 + 3500 (must be offset 4), T0 (0) and a time past the
 * last record (kafkajs answers the high watermark, 10, where Kafka answers -1).
 *
 * `admin`: the round trip an operator makes: createTopics, listTopics, describeConfigs of the
 * topic; createPartitions to --partitions + 2 and the metadata that shows them; alterConfigs
 * (retention.ms, then a bad value refused) and describeConfigs again; 10 messages produced and
 * deleteTopicRecords before offset 4 of partition 0, then fetchTopicOffsets; deleteTopics, then
 * listTopics until the topic is gone.
 *
 * Prints one JSON object per line on stdout ({"event": ...}); the Rust test checks them. kafkajs's
 * own logs (WARN and up) go to stderr as JSON lines. Every wait is bounded by --timeout-s: on
 * expiry the script prints {"event": "timeout", ...} and exits 2; any other failure exits 1.
 *
 * Usage: node clients.js MODE --bootstrap HOST:PORT --topic T [--group G] [--partitions N]
 *        [--messages N] [--timeout-s S]
 */
'use strict'

const { Kafka, logLevel, CompressionTypes, ConfigResourceTypes, Partitioners } = require('kafkajs')

const REQUEST_TIMEOUT_MS = 30000

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n')
}

function parseArgs(argv) {
  const args = {
    mode: null,
    bootstrap: null,
    topic: null,
    group: 'spool-tests-kafkajs',
    partitions: 4,
    messages: 400,
    timeoutS: 90,
  }
  const numeric = { '--partitions': 'partitions', '--messages': 'messages', '--timeout-s': 'timeoutS' }
  const strings = { '--bootstrap': 'bootstrap', '--topic': 'topic', '--group': 'group' }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a in numeric || a in strings) {
      const v = argv[++i]
      if (v === undefined) usage(`${a} needs a value`)
      if (a in numeric) {
        const n = Number(v)
        if (!Number.isFinite(n) || n <= 0) usage(`${a} ${v}: not a positive number`)
        args[numeric[a]] = n
      } else {
        args[strings[a]] = v
      }
    } else if (args.mode === null && !a.startsWith('-')) {
      args.mode = a
    } else {
      usage(`unexpected argument ${a}`)
    }
  }
  if (!['group', 'times', 'admin'].includes(args.mode)) usage(`mode must be group, times or admin`)
  if (!args.bootstrap || !args.topic) usage('--bootstrap and --topic are required')
  return args
}

function usage(why) {
  process.stderr.write(`clients.js: ${why}\n`)
  process.exit(64)
}

class Timeout extends Error {}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

/** A consumer crash kafkajs will not restart from: fails the run instead of waiting it out. */
let fatal = null

/** Waits until `cond()` holds, at most until `deadline` (Date.now() ms). */
async function until(cond, deadline, what) {
  for (;;) {
    if (fatal) throw fatal
    if (cond()) return
    if (Date.now() >= deadline) throw new Timeout(what)
    await sleep(20)
  }
}

/** kafkajs's logs, as JSON lines on stderr (stdout is for events only). */
const logCreator = () => ({ namespace, label, log }) => {
  const { message, ...rest } = log
  process.stderr.write(JSON.stringify({ level: label, namespace, message, ...rest }) + '\n')
}

function client(args) {
  return new Kafka({
    clientId: 'spool-tests-kafkajs',
    brokers: [args.bootstrap],
    logLevel: logLevel.WARN,
    logCreator,
    connectionTimeout: 3000,
    requestTimeout: REQUEST_TIMEOUT_MS,
    retry: { initialRetryTime: 100, maxRetryTime: 2000, retries: 8 },
  })
}

async function createTopic(kafka, args, partitions) {
  const admin = kafka.admin()
  await admin.connect()
  try {
    const created = await admin.createTopics({
      topics: [{ topic: args.topic, numPartitions: partitions, replicationFactor: 1 }],
      waitForLeaders: true,
      timeout: 10000,
    })
    emit('created', { topic: args.topic, partitions, created })
  } finally {
    await admin.disconnect()
  }
}

/** Produces value-<first> .. value-<first+count-1>: one message per send, acks=-1, gzip. */
async function produce(kafka, args, first, count, deadline, timestampOf) {
  // Idempotent: a send retried after a request timeout (a loaded machine) must not write the
  // record twice, once unacknowledged (kafkajs's retries without idempotence do).
  const producer = kafka.producer({
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
    idempotent: true,
    maxInFlightRequests: 1,
  })
  await producer.connect()
  try {
    for (let seq = first; seq < first + count; seq++) {
      if (Date.now() >= deadline) throw new Timeout('producing')
      const message = { key: `key-${seq % 17}`, value: `value-${seq}` }
      if (timestampOf) message.timestamp = String(timestampOf(seq))
      const acks = await producer.send({
        topic: args.topic,
        acks: -1,
        compression: CompressionTypes.GZIP,
        timeout: REQUEST_TIMEOUT_MS,
        messages: [message],
      })
      if (acks.length !== 1 || acks[0].errorCode !== 0) {
        throw new Error(`value-${seq}: unexpected acknowledgement ${JSON.stringify(acks)}`)
      }
      emit('acked', { seq, partition: acks[0].partition, offset: Number(acks[0].baseOffset) })
    }
  } finally {
    await producer.disconnect()
  }
}

/**
 * A group member. Reads only while `gate()` holds and only partitions of its latest assignment
 * (a batch it does not read is left unresolved, so kafkajs fetches it again); commits each read
 * batch before taking the next. `onRead(member, partition, offset, value)` sees every record.
 */
function member(kafka, args, index, gate, onRead) {
  const consumer = kafka.consumer({
    groupId: args.group,
    sessionTimeout: 10000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 200,
    retry: { initialRetryTime: 100, maxRetryTime: 2000, retries: 8 },
  })
  const m = { index, consumer, assignment: null }
  consumer.on(consumer.events.GROUP_JOIN, e => {
    m.assignment = (e.payload.memberAssignment[args.topic] || []).slice().sort((x, y) => x - y)
  })
  consumer.on(consumer.events.CRASH, e => {
    const { error, restart } = e.payload
    process.stderr.write(`member ${index} crashed (restart: ${restart}): ${error && error.stack}\n`)
    if (!restart) fatal = new Error(`member ${index} crashed: ${error && error.message}`)
  })
  m.start = async () => {
    await consumer.connect()
    await consumer.subscribe({ topics: [args.topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat, isRunning, isStale }) => {
        if (!gate() || !m.assignment || !m.assignment.includes(batch.partition)) {
          await sleep(50)
          return
        }
        let last = null
        for (const message of batch.messages) {
          if (!isRunning() || isStale()) break
          onRead(index, batch.partition, Number(message.offset), message.value.toString())
          resolveOffset(message.offset)
          last = message.offset
        }
        if (last !== null) {
          await consumer.commitOffsets([
            { topic: args.topic, partition: batch.partition, offset: String(Number(last) + 1) },
          ])
        }
        await heartbeat()
      },
    })
  }
  return m
}

async function groupMode(kafka, args, deadline) {
  await createTopic(kafka, args, args.partitions)
  await produce(kafka, args, 0, args.messages, deadline)

  const disjoint = (x, y) => x.every(p => !y.includes(p))
  let shared = false
  const bothHold = () => {
    const [x, y] = pair.map(m => m.assignment)
    return !!(x && y && x.length && y.length && disjoint(x, y))
  }
  let read = 0
  const pair = [0, 1].map(i =>
    member(
      kafka,
      args,
      i,
      () => shared,
      (mi, partition, offset, value) => {
        read++
        emit('read', { member: mi, partition, offset, value })
      }
    )
  )
  try {
    await Promise.all(pair.map(m => m.start()))
    // Both members must hold partitions before the reading counts as shared.
    await until(bothHold, deadline, 'both members assigned')
    emit('assigned', { a: pair[0].assignment, b: pair[1].assignment })
    shared = true
    await until(() => read >= args.messages, deadline, 'the pair reading everything')
  } finally {
    await Promise.all(pair.map(m => m.consumer.disconnect()))
  }
  emit('first_members_stopped', { read })

  const more = Math.floor(args.messages / 4)
  await produce(kafka, args, args.messages, more, deadline)
  let resumed = 0
  const fresh = member(
    kafka,
    args,
    2,
    () => true,
    (mi, partition, offset, value) => {
      resumed++
      emit('resumed_read', { member: mi, partition, offset, value })
    }
  )
  try {
    await fresh.start()
    await until(() => resumed >= more, deadline, 'the fresh member reading what came after')
  } finally {
    await fresh.consumer.disconnect()
  }
}

async function timesMode(kafka, args, deadline) {
  await createTopic(kafka, args, 1)
  const t0 = (Math.floor(Date.now() / 1000) - 3600) * 1000
  await produce(kafka, args, 0, 10, deadline, seq => t0 + 1000 * seq)
  const admin = kafka.admin()
  await admin.connect()
  try {
    for (const asked of [3500, 0, 60000]) {
      if (Date.now() >= deadline) throw new Timeout('offsets by timestamp')
      const found = await admin.fetchTopicOffsetsByTimestamp(args.topic, t0 + asked)
      emit('offset_for_time', {
        asked,
        partitions: found.map(f => f.partition),
        offset: found.length === 1 ? Number(found[0].offset) : null,
      })
    }
  } finally {
    await admin.disconnect()
  }
}

/** Kafka's `errorCode` of a KafkaJSProtocolError (or of one of an aggregate's causes). */
function errorCodeOf(e) {
  if (e && typeof e.code === 'number') return e.code
  for (const c of (e && e.errors) || []) {
    const code = errorCodeOf(c)
    if (code !== null) return code
  }
  return null
}

/** Add partitions, alter configs, delete records: each emitted as an event for the Rust test. */
async function adminChanges(kafka, admin, args, deadline) {
  const wanted = args.partitions + 2
  await admin.createPartitions({ topicPartitions: [{ topic: args.topic, count: wanted }] })
  const meta = await admin.fetchTopicMetadata({ topics: [args.topic] })
  emit('partitions_added', { count: meta.topics[0].partitions.length })
  let refused = null
  try {
    await admin.createPartitions({ topicPartitions: [{ topic: args.topic, count: wanted }] })
  } catch (e) {
    refused = errorCodeOf(e)
  }
  emit('partitions_not_grown', { error_code: refused })

  await admin.alterConfigs({
    validateOnly: false,
    resources: [{
      type: ConfigResourceTypes.TOPIC,
      name: args.topic,
      configEntries: [{ name: 'retention.ms', value: '3600000' }],
    }],
  })
  let badConfig = null
  try {
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{
        type: ConfigResourceTypes.TOPIC,
        name: args.topic,
        configEntries: [{ name: 'retention.ms', value: 'soon' }],
      }],
    })
  } catch (e) {
    badConfig = errorCodeOf(e)
  }
  const described = await admin.describeConfigs({
    resources: [{ type: ConfigResourceTypes.TOPIC, name: args.topic, configNames: ['retention.ms'] }],
    includeSynonyms: false,
  })
  const retention = described.resources[0].configEntries.find(e => e.configName === 'retention.ms')
  emit('config_altered', {
    value: retention && retention.configValue,
    source: retention && retention.configSource,
    read_only: retention && retention.readOnly,
    bad_value_error_code: badConfig,
  })

  const producer = kafka.producer({ allowAutoTopicCreation: false, idempotent: true })
  await producer.connect()
  try {
    for (let i = 0; i < 10; i++) {
      if (Date.now() >= deadline) throw new Timeout('producing for deleteTopicRecords')
      await producer.send({ topic: args.topic, acks: -1, messages: [{ partition: 0, value: `r-${i}` }] })
    }
  } finally {
    await producer.disconnect()
  }
  await admin.deleteTopicRecords({ topic: args.topic, partitions: [{ partition: 0, offset: '4' }] })
  const offsets = await admin.fetchTopicOffsets(args.topic)
  const p0 = offsets.find(o => o.partition === 0)
  emit('records_deleted', { low: Number(p0.low), high: Number(p0.high) })
}

async function adminMode(kafka, args, deadline) {
  await createTopic(kafka, args, args.partitions)
  const admin = kafka.admin()
  await admin.connect()
  try {
    emit('listed', { present: (await admin.listTopics()).includes(args.topic) })
    const described = await admin.describeConfigs({
      resources: [{ type: ConfigResourceTypes.TOPIC, name: args.topic }],
      includeSynonyms: false,
    })
    for (const r of described.resources) {
      const min = r.configEntries.find(e => e.configName === 'min.insync.replicas')
      emit('configs', {
        resource: r.resourceName,
        error_code: r.errorCode,
        entries: r.configEntries.length,
        names: r.configEntries.map(e => e.configName),
        min_insync_replicas: min ? { value: min.configValue, source: min.configSource } : null,
      })
    }
    await adminChanges(kafka, admin, args, deadline)
    await admin.deleteTopics({ topics: [args.topic], timeout: 10000 })
    let polls = 0
    for (;;) {
      polls++
      if (!(await admin.listTopics()).includes(args.topic)) break
      if (Date.now() >= deadline) throw new Timeout('the deleted topic leaving listTopics')
      await sleep(100)
    }
    emit('deleted', { polls })
  } finally {
    await admin.disconnect()
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2))
  const deadline = Date.now() + args.timeoutS * 1000
  // The bound on everything, a stuck request included.
  setTimeout(() => {
    emit('timeout', { mode: args.mode, after_s: args.timeoutS, waiting_for: 'the whole run' })
    process.exit(2)
  }, args.timeoutS * 1000 + 5000)
  const kafka = client(args)
  const run = { group: groupMode, times: timesMode, admin: adminMode }[args.mode]
  try {
    await run(kafka, args, deadline)
  } catch (e) {
    if (e instanceof Timeout) {
      emit('timeout', { mode: args.mode, after_s: args.timeoutS, waiting_for: e.message })
      process.exit(2)
    }
    process.stderr.write(`clients.js ${args.mode} failed: ${e && e.stack}\n`)
    process.exit(1)
  }
  emit('done')
  process.exit(0)
}

main()
