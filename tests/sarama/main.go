// sarama 1.22 (Debian's golang-github-shopify-sarama-dev) against spool's Kafka port, driven by
// tests/tests/kafka_sarama.rs (issue 17). Produces ten records (with Version 1.0: sarama's default,
// 0.8.2, sends Produce v0, which spool refuses per partition), then with sarama's DEFAULT config
// commits offset 7 for a group (OffsetCommit v1), starts a fresh client that reads the commit
// back (OffsetFetch v1), and describes a topic config (DescribeConfigs v0). One JSON object per
// line on stdout.
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
		adm.Close()
	}
	pom2.Close()
	om2.Close()
	c2.Close()
	fmt.Println("{\"event\":\"done\"}")
}
