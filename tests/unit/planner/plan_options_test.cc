#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "scheduler/plan/planner.h"

namespace prescient::scheduler::plan {
namespace {

TEST(PlanOptions, DefaultsFromEmptySpec) {
  const PlanOptions o = ParsePlanOptions("");
  EXPECT_EQ(o.order, Order::kGlobal);
  EXPECT_FALSE(o.epoch_order || o.remap || o.balance || o.sort || o.drop_last);
  EXPECT_DOUBLE_EQ(o.balance_cap, 1.25);
}

TEST(PlanOptions, ParsesEveryKey) {
  const PlanOptions o = ParsePlanOptions(
      "order=partial:0.3,cache=25%,epoch-order=on,remap=on,balance=on,balance-cap=1.5,sort=on,"
      "drop-last=on");
  EXPECT_EQ(o.order, Order::kPartial);
  EXPECT_DOUBLE_EQ(o.partial_q, 0.3);
  EXPECT_TRUE(o.cache.is_percent);
  EXPECT_DOUBLE_EQ(o.cache.value, 25);
  EXPECT_TRUE(o.epoch_order && o.remap && o.balance && o.sort && o.drop_last);
  EXPECT_DOUBLE_EQ(o.balance_cap, 1.5);
  EXPECT_EQ(ParsePlanOptions("order=groups:64").group_size, 64u);
  EXPECT_EQ(ParsePlanOptions("cache=1000").cache.SamplesFor(500), 500u);
  EXPECT_EQ(ParsePlanOptions("cache=25%").cache.SamplesFor(1'281'167), 320'291u);
  const PlanOptions solar = ParsePlanOptions("solar=on");
  EXPECT_TRUE(solar.epoch_order && solar.remap && solar.balance && solar.sort);
}

TEST(PlanOptions, CanonicalRoundTrips) {
  for (const char* spec : {"", "order=local,cache=77", "order=partial:0.125,cache=12.5%,solar=on",
                           "order=groups:7,sort=on,drop-last=on,balance-cap=2"}) {
    const PlanOptions o = ParsePlanOptions(spec);
    const std::string canonical = CanonicalPlanOptions(o);
    EXPECT_EQ(ParsePlanOptions(canonical), o) << spec;
    EXPECT_EQ(CanonicalPlanOptions(ParsePlanOptions(canonical)), canonical);
  }
  EXPECT_EQ(CanonicalPlanOptions(ParsePlanOptions("remap=on,order=global")),
            "order=global,cache=0,epoch-order=off,remap=on,balance=off,balance-cap=1.25,sort=off,"
            "drop-last=off");
}

void ExpectError(const std::string& spec, const std::string& needle) {
  try {
    ParsePlanOptions(spec);
    ADD_FAILURE() << "no error for " << spec;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PlanOptions, BadInputNamesKeyAndAcceptedValues) {
  ExpectError("order=random", "'order'");
  ExpectError("order=random", "partial:Q");
  ExpectError("order=partial:1.5", "'order'");
  ExpectError("order=groups:0", "'order'");
  ExpectError("cache=-3", "'cache'");
  ExpectError("cache=120%", "'cache'");
  ExpectError("remap=maybe", "on | off");
  ExpectError("balance-cap=0.5", "'balance-cap'");
  ExpectError("colour=blue", "unknown key");
  ExpectError("remap", "key=value");
}

}  // namespace
}  // namespace prescient::scheduler::plan
