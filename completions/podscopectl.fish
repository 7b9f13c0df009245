# fish completion for podscopectl(1)

function __podscopectl_ids
    podscopectl list --quiet 2>/dev/null | string sub --length 12
end

set -l cmds list status create start stop rm wait update info pull images inspecti rmi imagefsinfo
complete -c podscopectl -f
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -l no-ask-password -d 'do not let polkit ask for a password'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a list -d 'list sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a status -d 'show one sandbox'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a create -d 'create a sandbox'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a start -d 'start sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a stop -d 'stop sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a rm -d 'remove sandboxes'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a wait -d 'wait until a sandbox stops'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a update -d "set a sandbox's resources"
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a info -d 'runtime version, platform and readiness'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a pull -d 'pull an image'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a images -d 'list images'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a inspecti -d 'show one image as JSON'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a rmi -d 'remove images'
complete -c podscopectl -n "not __fish_seen_subcommand_from $cmds" -a imagefsinfo -d 'the image store disk use'
complete -c podscopectl -n "__fish_seen_subcommand_from status start stop rm wait update" -a '(__podscopectl_ids)'
for opt in memory cpu-quota cpu-period cpu-shares pids-limit
    complete -c podscopectl -n "__fish_seen_subcommand_from update" -l $opt -x
end
complete -c podscopectl -n "__fish_seen_subcommand_from list" -l state -x -a 'created ready notready'
complete -c podscopectl -n "__fish_seen_subcommand_from list" -l label -x
complete -c podscopectl -n "__fish_seen_subcommand_from list" -s q -l quiet -d 'full ids only'
for opt in namespace uid attempt hostname label annotation cgroup-parent runtime-handler memory cpu-quota cpu-period cpu-shares pids-limit port dns-server dns-search dns-option sysctl
    complete -c podscopectl -n "__fish_seen_subcommand_from create" -l $opt -x
end
complete -c podscopectl -n "__fish_seen_subcommand_from create" -l pid-namespace -x -a 'pod container node'
complete -c podscopectl -n "__fish_seen_subcommand_from create" -l log-directory -r -a '(__fish_complete_directories)'
complete -c podscopectl -n "__fish_seen_subcommand_from create" -l host-network
complete -c podscopectl -n "__fish_seen_subcommand_from create" -l start
