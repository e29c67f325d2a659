// sarama 1.22 (Debian's golang-github-shopify-sarama-dev) against spool's Kafka port, driven by
// tests/tests/kafka_sarama.rs (issue 17). Produces ten records (with Version 1.0: sarama's default,
// 0.8.2, sends Produce v0, which spool refuses per partition), then with sarama's DEFAULT config
// commits offset 7 for a group (OffsetCommit v1), starts a fresh client that reads the commit
// back (OffsetFetch v1), and describes a topic config (DescribeConfigs v0). Then an operator's
// round trip with ClusterAdmin: create a topic, add partitions (CreatePartitions v0), alter a
// config (AlterConfigs v0) and describe it, delete records before offset 4 of partition 0
// (DeleteRecords v0) and read the oldest offset back, delete the topic. One JSON object per line
// on stdout.
package main

import (
	"fmt"
	"os"

	"github.com/Shopify/sarama"
)

func main() {
	addr := []string{os.Args[1]}
	// Produce with a version that speaks record batches (sarama's default, 0.8.2, sends Produce v0).
	pc := sarama.NewConfig()
	pc.Version = sarama.V1_0_0_0
	pc.Producer.Return.Successes = true
	pc.Producer.RequiredAcks = sarama.WaitForAll
	p, err := sarama.NewSyncProducer(addr, pc)
	if err != nil {
		fmt.Println("producer:", err)
		os.Exit(1)
	}
	for i := 0; i < 10; i++ {
		part, off, err := p.SendMessage(&sarama.ProducerMessage{Topic: "sarama-t", Value: sarama.StringEncoder(fmt.Sprintf("v%d", i))})
		if err != nil {
			fmt.Println("send:", err)
			os.Exit(1)
		}
		if i == 9 {
			fmt.Printf("{\"event\":\"produced\",\"partition\":%d,\"offset\":%d}\n", part, off)
		}
	}
	p.Close()
	// The default config: commits with OffsetCommit v1, fetches offsets with OffsetFetch v1.
	dc := sarama.NewConfig()
	fmt.Printf("{\"event\":\"default_version\",\"version\":\"%s\"}\n", dc.Version)
	c, err := sarama.NewClient(addr, dc)
	if err != nil {
		fmt.Println("client:", err)
		os.Exit(1)
	}
	om, err := sarama.NewOffsetManagerFromClient("sarama-group", c)
	if err != nil {
		fmt.Println("om:", err)
		os.Exit(1)
	}
	pom, err := om.ManagePartition("sarama-t", 0)
	if err != nil {
		fmt.Println("pom:", err)
		os.Exit(1)
	}
	next, _ := pom.NextOffset()
	fmt.Printf("{\"event\":\"first_start\",\"next_offset\":%d}\n", next)
	pom.MarkOffset(7, "")
	pom.Close()
	om.Close()
	for e := range pom.Errors() {
		fmt.Printf("{\"event\":\"commit_error\",\"error\":%q}\n", e.Error())
	}
	c.Close()
	// A fresh client with the default config resumes from the commit.
	c2, err := sarama.NewClient(addr, sarama.NewConfig())
	if err != nil {
		fmt.Println("client2:", err)
		os.Exit(1)
	}
	om2, _ := sarama.NewOffsetManagerFromClient("sarama-group", c2)
	pom2, err := om2.ManagePartition("sarama-t", 0)
	if err != nil {
		fmt.Println("pom2:", err)
		os.Exit(1)
	}
	next2, _ := pom2.NextOffset()
	fmt.Printf("{\"event\":\"resumed\",\"next_offset\":%d}\n", next2)
	// Describe the topic's configs with the default admin version (DescribeConfigs v0).
	ac := sarama.NewConfig()
	ac.Version = sarama.V1_0_0_0
	adm, err := sarama.NewClusterAdmin(addr, ac)
	if err == nil {
		entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: "sarama-t", ConfigNames: []string{"min.insync.replicas"}})
		if err != nil {
			fmt.Printf("{\"event\":\"describe_error\",\"error\":%q}\n", err.Error())
		}
		for _, e := range entries {
			fmt.Printf("{\"event\":\"config\",\"name\":%q,\"value\":%q,\"read_only\":%t,\"default\":%t}\n", e.Name, e.Value, e.ReadOnly, e.Default)
		}
		adminRoundTrip(addr, adm)
		adm.Close()
	}
	pom2.Close()
	om2.Close()
	c2.Close()
	fmt.Println("{\"event\":\"done\"}")
}

// fail prints the step that failed as an event and exits 1.
func fail(step string, err error) {
	fmt.Printf("{\"event\":\"admin_error\",\"step\":%q,\"error\":%q}\n", step, err.Error())
	os.Exit(1)
}

func adminRoundTrip(addr []string, adm sarama.ClusterAdmin) {
	const topic = "sarama-admin"
	if err := adm.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}, false); err != nil {
		fail("create", err)
	}
	if err := adm.CreatePartitions(topic, 4, nil, false); err != nil {
		fail("create_partitions", err)
	}
	meta, err := adm.DescribeTopics([]string{topic})
	if err != nil || len(meta) != 1 {
		fail("describe_topics", fmt.Errorf("%v (%d topics)", err, len(meta)))
	}
	fmt.Printf("{\"event\":\"partitions_added\",\"count\":%d}\n", len(meta[0].Partitions))
	again := adm.CreatePartitions(topic, 4, nil, false)
	code := -1
	if e, ok := again.(*sarama.TopicPartitionError); ok {
		code = int(e.Err)
	}
	fmt.Printf("{\"event\":\"partitions_not_grown\",\"error_code\":%d}\n", code)
	retention := "3600000"
	if err := adm.AlterConfig(sarama.TopicResource, topic, map[string]*string{"retention.ms": &retention}, false); err != nil {
		fail("alter_config", err)
	}
	bad := "soon"
	badErr := adm.AlterConfig(sarama.TopicResource, topic, map[string]*string{"retention.ms": &bad}, false)
	entries, err := adm.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic, ConfigNames: []string{"retention.ms"}})
	if err != nil || len(entries) != 1 {
		fail("describe_config", fmt.Errorf("%v (%d entries)", err, len(entries)))
	}
	fmt.Printf("{\"event\":\"config_altered\",\"value\":%q,\"read_only\":%t,\"bad_value_refused\":%t}\n", entries[0].Value, entries[0].ReadOnly, badErr != nil)

	pc := sarama.NewConfig()
	pc.Version = sarama.V1_0_0_0
	pc.Producer.Return.Successes = true
	pc.Producer.RequiredAcks = sarama.WaitForAll
	pc.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer(addr, pc)
	if err != nil {
		fail("producer", err)
	}
	for i := 0; i < 10; i++ {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Partition: 0, Value: sarama.StringEncoder(fmt.Sprintf("r%d", i))}); err != nil {
			fail("send", err)
		}
	}
	p.Close()
	if err := adm.DeleteRecords(topic, map[int32]int64{0: 4}); err != nil {
		fail("delete_records", err)
	}
	cc := sarama.NewConfig()
	cc.Version = sarama.V1_0_0_0
	c, err := sarama.NewClient(addr, cc)
	if err != nil {
		fail("client", err)
	}
	oldest, err := c.GetOffset(topic, 0, sarama.OffsetOldest)
	if err != nil {
		fail("oldest", err)
	}
	c.Close()
	fmt.Printf("{\"event\":\"records_deleted\",\"oldest\":%d}\n", oldest)
	if err := adm.DeleteTopic(topic); err != nil {
		fail("delete_topic", err)
	}
	fmt.Println("{\"event\":\"topic_deleted\"}")
}
