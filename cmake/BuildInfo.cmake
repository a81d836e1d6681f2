# cmake/BuildInfo.cmake: the version and git commit every report carries
# (`tool_version` in JSON, `megascale --version`; issue 13).
#
# The commit is read at build time, not at configure time, so a build after a
# new commit stamps the new one: the target megascale_build_info re-runs
# cmake/WriteBuildInfo.cmake on every build, which rewrites
# ${PROJECT_BINARY_DIR}/generated/base/build_info.h only when its text changes
# (nothing recompiles otherwise). Outside a git checkout (a tarball) the commit
# is "unknown"; a checkout with uncommitted changes gets "-dirty".
set(MEGASCALE_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
add_custom_target(megascale_build_info ALL
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DOUT=${MEGASCALE_GENERATED_DIR}/base/build_info.h
          -DVERSION=${PROJECT_VERSION}
          -P ${PROJECT_SOURCE_DIR}/cmake/WriteBuildInfo.cmake
  BYPRODUCTS ${MEGASCALE_GENERATED_DIR}/base/build_info.h
  COMMENT "megascale: stamping version and git commit"
  VERBATIM)

# megascale_base: base/'s compiled part (the build stamp, the atomic text writer,
# the mpirun launcher, the option tables on CLI11, the progress line), nlohmann-json, the project's one JSON library
# (base/json.h), and {fmt}, its one formatter.
add_library(megascale_base STATIC ${PROJECT_SOURCE_DIR}/base/tool_version.cc ${PROJECT_SOURCE_DIR}/base/text_file.cc
            ${PROJECT_SOURCE_DIR}/base/mpirun.cc ${PROJECT_SOURCE_DIR}/base/options.cc
            ${PROJECT_SOURCE_DIR}/base/json_document.cc ${PROJECT_SOURCE_DIR}/base/progress_line.cc)
target_include_directories(megascale_base PUBLIC ${PROJECT_SOURCE_DIR})
target_include_directories(megascale_base PRIVATE ${MEGASCALE_GENERATED_DIR})
target_link_libraries(megascale_base PUBLIC nlohmann_json::nlohmann_json fmt::fmt PRIVATE CLI11::CLI11)
add_dependencies(megascale_base megascale_build_info)
