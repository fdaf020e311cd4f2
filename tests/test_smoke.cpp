#include <gtest/gtest.h>

#include "gguf/ggml_type.h"

TEST(GgmlType, BlockSizes) {
  EXPECT_EQ(nexus::ggml_row_size(nexus::GgmlType::Q8_0, 64), 68u);
  EXPECT_EQ(nexus::ggml_row_size(nexus::GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(nexus::ggml_type_traits(99), nullptr);
}
